"""A task from one file: `daybreak --plugin my_task.py ...` (or DAYBREAK_PLUGINS) registers the file's task, reader,
model and recipe without packaging metadata, in the command's own process and in every process it starts (an
experiment's trials). Run in subprocesses, so that the test session's registries stay as they are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import single_line

ONE_FILE = '''
"""squares: a throwaway task in one file (reader, model, recipe included): a bright 3x3 square in one of the
four quadrants of an 8x8 image, on noise; its data is made in memory, so it has no data folder."""
import torch
from torch import nn

from daybreak.data.base import TaskData
from daybreak.metrics import TOP1
from daybreak.models import create_model, register_model
from daybreak.recipes import RECIPES, Recipe, TrainSetup
from daybreak.tasks import TASKS, InputSpec, LeaderboardFacts, Task


def load_squares(data_dir, allow_custom, download):
    g = torch.Generator().manual_seed(0)

    def images(n):
        y = torch.randint(0, 4, (n,), generator=g)
        x = torch.randint(0, 60, (n, 1, 8, 8), generator=g).to(torch.uint8)
        for i, k in enumerate(y.tolist()):
            r, c = 4 * (k // 2), 4 * (k % 2)
            x[i, 0, r:r + 3, c:c + 3] = 220
        return x, y

    (tx, ty), (ex, ey) = images(256), images(64)
    return TaskData(train_x=tx, train_y=ty, eval_x=ex, eval_y=ey, num_classes=4, source="in memory")


@register_model("squares_net")
def squares_net(num_classes=4):
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, num_classes))


def build(hp, data, device):
    model = create_model("squares_net", num_classes=data.num_classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=hp["lr"], momentum=0.9)
    return TrainSetup(model=model, optimizer=optimizer, lr_multiplier=lambda step, total: 1.0,
                      loss_fn=nn.functional.cross_entropy, prepare=lambda x: x.float() / 255.0)


TASKS.add("squares", Task(
    name="squares", description="a throwaway one-file task", metric=TOP1, target=0.9, eval_split="64 images",
    num_classes=4, load=load_squares, reference_recipe="squares", files="none (made in memory)",
    input_spec=InputSpec(shape=(1, 8, 8), dtype=torch.uint8), has_data_dir=False,
    leaderboard=LeaderboardFacts(title="Squares (test)", eval_split="64 images"),
))
RECIPES.add("squares", Recipe(name="squares", task="squares", model="squares_net", summary="SGD",
                              defaults=dict(batch_size=32, epochs=8, lr=0.1), build=build))
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    root = tmp_path_factory.mktemp("plugin")
    file = root / "squares.py"
    file.write_text(ONE_FILE)
    env = {k: v for k, v in os.environ.items() if k != "DAYBREAK_PLUGINS"}
    env.update(DAYBREAK_DATA=str(root / "data"), DAYBREAK_CACHE=str(root / "cache"))

    def daybreak(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "daybreak", *args], cwd=root, env={**env, **extra},
                              capture_output=True, text=True, timeout=600)

    return dict(root=root, file=file, daybreak=daybreak)


def test_plugin_flag_registers_a_task_from_one_file(plugin):
    done = plugin["daybreak"]("run", "squares", "--plugin", str(plugin["file"]), "--out", "run", "--quiet")
    assert done.returncode == 0, done.stderr
    r = json.loads((plugin["root"] / "run" / "result.json").read_text())
    assert (r["task"], r["recipe"], r["model"], r["status"]) == ("squares", "squares", "squares_net", "reached")
    # without it the task is unknown; the environment variable works the same way, for any command
    assert plugin["daybreak"]("recipes", "squares").returncode == 2
    listed = plugin["daybreak"]("tasks", "--json", DAYBREAK_PLUGINS=str(plugin["file"]))
    assert listed.returncode == 0 and "squares" in {t["name"] for t in json.loads(listed.stdout)}


def test_the_trials_of_an_experiment_load_the_plugin_too(plugin):
    """Each trial is a fresh `daybreak run` process: --plugin reaches it through DAYBREAK_PLUGINS."""
    done = plugin["daybreak"]("--plugin", str(plugin["file"]), "repeat", "squares", "--runs", "1", "--out", "exp")
    assert done.returncode == 0, done.stderr
    summary = json.loads((plugin["root"] / "exp" / "summary.json").read_text())
    assert summary["task"] == "squares" and summary["n_reached"] == 1


def test_plugin_mistakes_are_one_line(plugin, tmp_path):
    missing = plugin["daybreak"]("--plugin", str(tmp_path / "nope.py"), "tasks")
    assert missing.returncode == 2 and single_line(missing.stderr) and "no such file" in missing.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("import math\n\nraise RuntimeError('boom')\n")
    done = plugin["daybreak"]("tasks", "--plugin", str(broken))
    assert done.returncode == 2 and single_line(done.stderr)
    assert f"{broken}:3: RuntimeError: boom" in done.stderr
    bare = plugin["daybreak"]("tasks", "--plugin")
    assert bare.returncode == 2 and "--plugin needs a file" in bare.stderr


def test_plugin_flags_are_taken_out_before_parsing():
    from daybreak.plugins import take_plugin_flags

    assert take_plugin_flags(["run", "digits", "--", "--plugin", "x"]) == ["run", "digits", "--", "--plugin", "x"]
    assert Path(__file__).exists()
