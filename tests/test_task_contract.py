"""The contract of a task file: a task that daybreak has never heard of, registered from one task file (+ its own
reader, model and recipe, in an installed package found through entry points), works with every command that
takes a task, through the real command line. Nothing in daybreak names it.

The throwaway task, ``fashion``: 12x12 grey images of 4 classes (a bright square in one of the four quadrants, on
noise) in a ``fashion.npz`` file the test writes; its reader, a small CNN and a recipe live beside the task file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from conftest import single_line

TASK_FILE = '''
"""fashion: a throwaway task (the contract test's), 12x12 images of 4 classes from fashion.npz."""
import torch

from daybreak.metrics import TOP1
from daybreak.tasks import TASKS, InputSpec, LeaderboardFacts, Task, reader

TASKS.add("fashion", Task(
    name="fashion", description="a throwaway task: squares in quadrants", metric=TOP1, target=0.9,
    eval_split="the 100 test images", num_classes=4, load=reader("daybreak_fashion.reader", "load_fashion"),
    reference_recipe="fashion", files="fashion.npz", input_spec=InputSpec(shape=(1, 12, 12), dtype=torch.uint8),
    leaderboard=LeaderboardFacts(title="Fashion (test)", eval_split="the 100 test images"),
))
'''

READER = '''
"""Reads fashion.npz (train_x, train_y, eval_x, eval_y) from the task's folder."""
import numpy as np
import torch

from daybreak.data.base import TaskData, task_data_dir
from daybreak.errors import DataError


def load_fashion(data_dir, *, allow_custom_data=False, download=True):
    folder = task_data_dir("fashion", data_dir)
    path = folder / "fashion.npz"
    if not path.is_file():
        raise DataError(f"fashion: {path} not found")
    with np.load(path) as f:
        arrays = {k: torch.from_numpy(f[k].copy()) for k in ("train_x", "train_y", "eval_x", "eval_y")}
    return TaskData(num_classes=4, source=str(folder.resolve()), **arrays)
'''

MODEL = '''
"""fashion_net: a small CNN for 12x12 images."""
from torch import nn

from daybreak.models import register_model


@register_model("fashion_net")
def fashion_net(num_classes: int = 4, width: int = 8) -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(3),
                         nn.Flatten(), nn.Linear(2 * width * 9, num_classes))
'''

RECIPE = '''
"""fashion: SGD on fashion_net, a few epochs."""
import torch
from torch import nn

from daybreak.models import create_model
from daybreak.recipes import RECIPES, Recipe, TrainSetup

HYPERPARAMETERS = dict(batch_size=32, epochs=6, lr=0.1, momentum=0.9)


def build(hp, data, device):
    model = create_model("fashion_net", num_classes=data.num_classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=hp["lr"], momentum=hp["momentum"])
    return TrainSetup(model=model, optimizer=optimizer, lr_multiplier=lambda step, total: 1.0,
                      loss_fn=nn.functional.cross_entropy, prepare=lambda x: x.float() / 255.0)


RECIPES.add("fashion", Recipe(name="fashion", task="fashion", model="fashion_net", summary="SGD, constant lr",
                              defaults=HYPERPARAMETERS, build=build))
'''

ENTRY_POINTS = """\
[daybreak.tasks]
fashion = daybreak_fashion.task

[daybreak.models]
fashion_net = daybreak_fashion.model

[daybreak.recipes]
fashion = daybreak_fashion.recipe
"""


def write_fashion(folder: Path, n_train: int = 400, n_eval: int = 100, seed: int = 0) -> Path:
    """A learnable 4-class set: class k is a bright 4x4 square in quadrant k on dim noise."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)

    def images(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, 4, n)
        x = rng.integers(0, 60, (n, 1, 12, 12)).astype(np.uint8)
        for i, k in enumerate(y):
            r, c = 1 + 6 * (k // 2), 1 + 6 * (k % 2)
            x[i, 0, r:r + 4, c:c + 4] = 220
        return x, y.astype(np.int64)

    (tx, ty), (ex, ey) = images(n_train), images(n_eval)
    np.savez(folder / "fashion.npz", train_x=tx, train_y=ty, eval_x=ex, eval_y=ey)
    return folder


def install_plugin(site: Path) -> Path:
    """The task file, reader, model and recipe as an installed package with its entry points."""
    pkg = site / "daybreak_fashion"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for name, text in (("task", TASK_FILE), ("reader", READER), ("model", MODEL), ("recipe", RECIPE)):
        (pkg / f"{name}.py").write_text(textwrap.dedent(text))
    info = site / "daybreak_fashion-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: daybreak-fashion\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return site


@pytest.fixture(scope="module")
def fashion(tmp_path_factory):
    root = tmp_path_factory.mktemp("fashion")
    site = install_plugin(root / "site")
    home = root / "home"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
               DAYBREAK_DATA=str(home / "data"), DAYBREAK_CACHE=str(home / "cache"),
               DAYBREAK_DB=f"sqlite:///{home / 'leaderboard.sqlite'}")
    env.pop("DAYBREAK_POWERCAP_ROOT", None)

    def daybreak(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "daybreak", *args], cwd=root, env=env, capture_output=True,
                              text=True, timeout=300)

    data = write_fashion(root / "fashion-data")
    run = daybreak("run", "fashion", "--data-dir", str(data), "--out", str(root / "run"), "--quiet")
    assert run.returncode == 0, run.stderr
    return dict(root=root, data=data, run=root / "run", daybreak=daybreak)


def test_run_trains_the_new_task_to_its_target(fashion):
    r = json.loads((fashion["run"] / "result.json").read_text())
    assert (r["task"], r["recipe"], r["model"], r["status"]) == ("fashion", "fashion", "fashion_net", "reached")
    assert r["best_accuracy"] >= 0.9 and r["data_source"] == str(fashion["data"].resolve())


def test_infer_reads_the_runs_own_data_again(fashion):
    done = fashion["daybreak"]("infer", str(fashion["run"]))
    assert done.returncode == 0, done.stderr
    inf = json.loads((fashion["run"] / "inference.json").read_text())
    assert inf["task"] == "fashion" and inf["n_examples"] == 100 and inf["valid"]
    assert inf["data_source"] == str(fashion["data"].resolve())  # Task.data_folder: the recorded folder


def test_throughput_takes_the_tasks_model_and_its_real_data(fashion):
    out = fashion["root"] / "sweep"
    common = ["--batch-sizes", "16", "--warmup", "1", "--steps", "2", "--repeats", "1", "--device", "cpu"]
    done = fashion["daybreak"]("throughput", "--model", "fashion_net", "--data", "fashion", "--data-dir",
                               str(fashion["data"]), "--out", str(out), *common)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["status"], r["input_shape"], r["config"]["data"]) for r in rows] == [("ok", [1, 12, 12], "fashion")]
    synthetic = fashion["daybreak"]("throughput", "--model", "fashion_net", "--out", str(out / "synthetic"),
                                    "--image-size", "16", *common)
    assert synthetic.returncode == 0, synthetic.stderr
    row = json.loads((out / "synthetic" / "results.jsonl").read_text().splitlines()[0])
    assert row["status"] == "ok" and row["input_shape"] == [1, 16, 16]  # the task's channels, --image-size


def _peak(path: Path) -> Path:
    from daybreak.records.throughput import PeakResult

    peak = PeakResult(machine_key="test", device="cpu", device_name="Test CPU", torch="x", threads=1,
                      flops_per_s={"fp32": 5e10}, bandwidth_bytes_per_s=2e9, measured_at=datetime.now(timezone.utc))
    path.write_text(peak.model_dump_json())
    return path


def test_roofline_counts_the_tasks_step_with_and_without_its_files(fashion):
    root, peak = fashion["root"], _peak(fashion["root"] / "peak.json")
    done = fashion["daybreak"]("analyze", "roofline", str(fashion["run"]), "--peak", str(peak),
                               "--out", str(root / "roofline"))
    assert done.returncode == 0, done.stderr
    point = json.loads((root / "roofline" / "roofline.json").read_text())["points"][0]
    assert point["flops_per_step"] > 0 and not any("not found" in n for n in point["notes"])
    # the data folder moved away: the task's stand-in (from its InputSpec) has the same shapes, so the same FLOPs
    moved = fashion["data"].rename(root / "moved-away")
    try:
        done = fashion["daybreak"]("analyze", "roofline", str(fashion["run"]), "--peak", str(peak),
                                   "--out", str(root / "roofline-2"))
    finally:
        moved.rename(fashion["data"])
    assert done.returncode == 0, done.stderr
    again = json.loads((root / "roofline-2" / "roofline.json").read_text())["points"][0]
    assert again["flops_per_step"] == point["flops_per_step"]
    assert any("counted on synthetic inputs of the task's shapes, 4 classes" in n for n in again["notes"])


def test_leaderboard_imports_and_ranks_the_run(fashion):
    done = fashion["daybreak"]("leaderboard", "import", str(fashion["run"]))
    assert done.returncode == 0, done.stderr + done.stdout
    shown = fashion["daybreak"]("leaderboard", "show", "--task", "fashion", "--objective", "train-time", "--json")
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)
    r = json.loads((fashion["run"] / "result.json").read_text())
    assert len(rows) == 1 and rows[0]["rank"] == 1 and rows[0]["value"] == pytest.approx(r["time_to_target_s"])


def test_mistakes_about_the_new_task_are_one_line(fashion):
    done = fashion["daybreak"]("throughput", "--model", "fashion_net", "--data", "nosuch")
    assert done.returncode == 2 and single_line(done.stderr) and "fashion" in done.stderr  # named among the known
    done = fashion["daybreak"]("run", "fashion", "--data-dir", str(fashion["root"] / "empty"), "--out",
                               str(fashion["root"] / "r2"), "--quiet")
    assert done.returncode == 2 and single_line(done.stderr) and "fashion.npz not found" in done.stderr
