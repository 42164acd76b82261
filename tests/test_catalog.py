"""Contract tests over the registries (timm's style): every registered task, recipe and model, on synthetic
inputs of the task's own input spec; plus the doors users come in by: recipe files, entry points, the Python API.
"""

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch

import daybreak
from daybreak.cli import main
from daybreak.data.base import TaskData
from daybreak.errors import ConfigError
from daybreak.leaderboard.tasks import leaderboard_task
from daybreak.metrics import METRICS
from daybreak.models import MODELS, count_parameters, create_model
from daybreak.recipes import RECIPES, get_recipe
from daybreak.registry import Registry
from daybreak.tasks import TASKS, get_task
from daybreak.tasks.batches import BatchPlan, evaluator_for, train_batches_for
from daybreak.train.distributed import DistContext
from daybreak.train.runner import RunConfig, run
from daybreak.train.spec import RunSpec, resolve_run_spec
from daybreak.train.step import Backend, TrainStep
from daybreak.train.views import TrainingData

from conftest import REPO, single_line

CPU = torch.device("cpu")
# tiny sizes so every recipe builds and steps in a second on a CPU (the contract, not the recipe's quality)
TINY = {
    "imagenet_resnet50": dict(image_size=32, eval_size=32, eval_resize=36, batch_size=2, workers=0),
    "squad_bert_base": dict(layers=1, hidden=32, heads=2, intermediate=64, max_seq_len=48, doc_stride=16,
                            max_query_len=12, batch_size=2, eval_batch_size=4),
    "cifar10": dict(batch_size=8),
    "cifar10_muon": dict(batch_size=8),
    "cifar10_96": dict(batch_size=8),
    "mnist": dict(batch_size=8),
    "digits": dict(batch_size=8),
}


def synthetic_data(task_name: str, tmp_path: Path) -> TaskData:
    """The task's data made from its input spec (in-memory tasks), or the smallest real-format stand-in."""
    task = get_task(task_name)
    if task.stand_in is not None:  # imagenet: shapes only, batches come from its pipeline
        return task.stand_in_data(4)
    if task_name == "squad":
        from test_squad import write_tiny_squad

        from daybreak.data.squad import load_squad

        return load_squad(write_tiny_squad(tmp_path / "squad", n_train=8, n_dev=4), allow_custom_data=True)
    g = torch.Generator().manual_seed(0)
    x, y = task.input_spec.example(32, task.num_classes, generator=g)
    ex, ey = task.input_spec.example(16, task.num_classes, generator=g)
    return TaskData(train_x=x, train_y=y, eval_x=ex, eval_y=ey, num_classes=task.num_classes, official=False)


@pytest.mark.parametrize("name", TASKS.names())
def test_every_task_is_complete(name):
    task = get_task(name)
    assert task.name == name and task.metric.name in METRICS and 0 < task.target <= 1
    assert task.reference_recipe in RECIPES and get_recipe(task.reference_recipe).task == name
    assert task.description and task.eval_split and task.leaderboard.title
    assert TASKS.origin(name) == f"daybreak.tasks.{name}"  # one task, one file
    lb = leaderboard_task(name)  # the leaderboard's facts come from the catalog, not a second table
    assert (lb.metric, lb.target, lb.dawnbench, lb.dawnbench_field) == (
        task.metric.name, task.target, task.leaderboard.dawnbench, task.metric.dawnbench_column)
    assert lb.target_label and task.target_label


@pytest.mark.parametrize("name", TASKS.names())
def test_every_task_answers_what_the_other_commands_ask_of_it(name):
    """What throughput, infer, roofline and evaluate ask a task instead of keeping tables of their own."""
    task = get_task(name)
    stand_in = task.stand_in_data(3, examples=2)  # analyze roofline without the files
    if task.in_memory:
        assert stand_in.train_x.shape == (2, *task.input_spec.shape) and stand_in.train_x.dtype == task.input_spec.dtype
        assert stand_in.num_classes == 3 and int(stand_in.train_y.max()) < 3
    else:
        assert stand_in is None or stand_in.num_classes == 3  # imagenet's own stand-in; squad has none
    source = "/data/somewhere"  # infer/evaluate: the folder a recorded data_source means
    assert task.data_folder(source) == (Path(source) if task.has_data_dir else None)
    assert task.data_folder("") is None
    assert task.feeds_sweeps == (name in {"digits", "mnist", "cifar10"})  # images in memory: throughput --data


def test_cifar10_reads_the_folder_around_its_tarball_again():
    task = get_task("cifar10")
    assert task.data_folder("/d/cifar-10-python.tar.gz") == Path("/d")
    assert task.data_folder("/d/cifar-10-batches-py") == Path("/d")


@pytest.mark.parametrize("recipe_name", RECIPES.names())
def test_every_recipe_builds_steps_and_evaluates_on_its_tasks_input_spec(recipe_name, tmp_path):
    recipe = get_recipe(recipe_name)
    task = get_task(recipe.task)
    hp = recipe.hyperparameters(TINY.get(recipe_name, {}))
    data = synthetic_data(task.name, tmp_path)
    setup = recipe.build(hp, TrainingData(data), CPU)
    backend = Backend(CPU, "off")
    step = TrainStep(setup.model, setup.optimizer, setup.loss_fn, backend, clip_grad_norm=setup.clip_grad_norm)
    plan = BatchPlan(setup=setup, batch_size=hp["batch_size"], epochs=1, seed=0, device=CPU, amp="off",
                     ctx=DistContext())
    if task.name == "imagenet":  # no JPEGs in the stand-in: a batch of the pipeline's exact shape
        x, y = data.example_train_batch(2)
        x, y = setup.prepare(x), y
    else:
        batches = train_batches_for(task, data, plan)
        batches.start()
        x, y = next(iter(batches.epoch(0)))
    before = [p.detach().clone() for p in setup.model.parameters() if p.requires_grad]
    loss = step(x, y)
    assert torch.isfinite(loss)
    after = [p for p in setup.model.parameters() if p.requires_grad]
    assert any(not torch.equal(a, b) for a, b in zip(before, after))  # the step changed the weights
    with torch.inference_mode():
        out = setup.evaluated_model()(x)
    assert out.shape[0] == x.shape[0] and torch.isfinite(out.float()).all()
    if task.name != "imagenet":  # the task's own evaluator computes its metric on the (synthetic) eval split
        metrics = evaluator_for(task, data, plan)(setup.evaluated_model())
        assert 0.0 <= metrics[task.metric.name] <= 1.0


@pytest.mark.parametrize("model_name", MODELS.names())
def test_every_model_builds_and_runs_forward(model_name):
    small = {"bert_base": dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64),
             "bert_base_squad": dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=2,
                                     intermediate_size=64)}
    model = create_model(model_name, **small.get(model_name, {})).eval()
    assert count_parameters(model) > 0
    users = [get_recipe(r) for r in RECIPES.names() if get_recipe(r).model == model_name]
    if model_name.startswith("bert"):
        x = torch.randint(1, 100, (2, 16))
        if model_name == "bert_base_squad":
            x = torch.stack([x, torch.zeros_like(x), torch.ones_like(x)], dim=1)
    else:
        spec = get_task(users[0].task).input_spec if users else get_task("imagenet").input_spec
        shape = (3, 32, 32) if spec.shape == (3, 224, 224) else spec.shape
        x = torch.rand(2, *shape)
    with torch.inference_mode():
        out = model(x)
    assert torch.isfinite(out.float()).all()


def test_registry_override_restores_the_entry():
    task = get_task("digits")
    with TASKS.override("digits", dataclasses.replace(task, target=0.5)):
        assert get_task("digits").target == 0.5
    assert get_task("digits") is task


def test_entry_points_add_tasks_from_installed_packages(tmp_path, monkeypatch):
    """An installed package's entry point (group daybreak.tasks) registers a task without editing daybreak."""
    pkg = tmp_path / "site"
    (pkg / "daybreak_toy").mkdir(parents=True)
    (pkg / "daybreak_toy" / "__init__.py").write_text(
        "import torch\n"
        "from daybreak.metrics import TOP1\n"
        "from daybreak.tasks import InputSpec, LeaderboardFacts, Task\n"
        "TOY = Task(name='toy', description='a plug-in task', metric=TOP1, target=0.5, eval_split='all',\n"
        "           num_classes=2, load=lambda d, a, dl: None, reference_recipe='digits',\n"
        "           input_spec=InputSpec(shape=(1, 8, 8), dtype=torch.float32), leaderboard=LeaderboardFacts('Toy'))\n")
    dist = pkg / "daybreak_toy-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: daybreak-toy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[daybreak.tasks]\ntoy = daybreak_toy:TOY\n")
    monkeypatch.syspath_prepend(str(pkg))
    registry = Registry("task", entry_point_group="daybreak.tasks")
    assert registry.get("toy").description == "a plug-in task"


def test_concurrent_first_callers_wait_for_the_whole_registry(tmp_path, monkeypatch):
    """A server's first requests arrive together: every thread that asks while the registry imports its modules
    gets the whole registry (issue 29: 18 of 20 concurrent requests to a fresh server were told 'digits' is not a
    task). The modules sleep while imported, so that the others ask while discovery is under way."""
    import threading

    pkg = tmp_path / "slowpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from daybreak.registry import Registry\nITEMS = Registry('item', "
                                     "package='slowpkg')\n")
    for name in ("a", "b", "c"):
        (pkg / f"{name}.py").write_text(f"import time\nfrom slowpkg import ITEMS\ntime.sleep(0.2)\n"
                                        f"ITEMS.add({name!r}, {name!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    items = importlib.import_module("slowpkg").ITEMS
    barrier, seen = threading.Barrier(8), []

    def ask():
        barrier.wait(timeout=30)
        seen.append(items.names())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert seen == [["a", "b", "c"]] * 8
    for name in ("slowpkg", "slowpkg.a", "slowpkg.b", "slowpkg.c"):
        sys.modules.pop(name, None)


# --- recipes users bring ---------------------------------------------------------------------------------------

EXAMPLE = REPO / "examples" / "recipes" / "digits_wide.py"


def test_the_example_recipe_file_runs_and_is_recorded_with_its_hash(tmp_path, capsys):
    code = main(["run", "digits", "--recipe", str(EXAMPLE), "--set", "epochs=3", "--full-schedule",
                 "--out", str(tmp_path / "r"), "-q"])
    assert code in (0, 3)
    r = json.loads((tmp_path / "r" / "result.json").read_text())
    import hashlib

    assert r["recipe"] == "digits_wide" and r["context"]["recipe_sha256"] == hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    assert not r["official"] and any("recipe file" in reason for reason in r["unofficial_reasons"])
    assert len(r["history"]) == 3 and r["hyperparameters"]["epochs"] == 3


def test_a_recipe_cannot_see_the_evaluation_data(tmp_path):
    peek = tmp_path / "peek.py"
    peek.write_text(EXAMPLE.read_text().replace('RECIPES.add("digits_wide"', 'RECIPES.add("digits_peek"')
                    .replace('name="digits_wide"', 'name="digits_peek"')
                    .replace("    model = WideCNN(", "    data.eval_y  # tuning on the test set: refused\n    model = WideCNN("))
    r = run(RunConfig(recipe=str(peek), out=tmp_path / "r", quiet=True))  # a crash in build: recorded
    assert r.status == "failed" and "AttributeError" in r.message and "training data only" in r.message


def test_recipe_file_mistakes_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\nraise ValueError('oops')\n")
    none = tmp_path / "none.py"
    none.write_text("x = 1\n")
    for path, fragment in ((bad, "bad.py:2: ValueError: oops"), (none, "exactly one recipe"),
                           (tmp_path / "missing.py", "no such file")):
        assert main(["run", "--recipe", str(path), "--out", str(tmp_path / "o"), "-q"]) == 2
        err = capsys.readouterr().err
        assert single_line(err) and fragment in err, err


def test_one_recipe_name_from_two_files_each_file_keeps_its_own(tmp_path):
    """A recipe file as it was at two commits (`daybreak ab --a-commit --b-commit`) registers one name twice in the
    parent process: each file's runs use that file's recipe; a name daybreak owns stays refused."""
    source = EXAMPLE.read_text()
    assert "lr=0.004," in source
    first, second = tmp_path / "a" / "my_recipe.py", tmp_path / "b" / "my_recipe.py"
    for path, lr in ((first, "0.004"), (second, "0.002")):
        path.parent.mkdir()
        path.write_text(source.replace("lr=0.004,", f"lr={lr},").replace("examples", f"examples ({lr})"))
    specs = [resolve_run_spec(RunConfig(task="digits", recipe=str(p), out=tmp_path / "r")) for p in (first, second)]
    assert [s.recipe for s in specs] == ["digits_wide", "digits_wide"]
    assert [s.hyperparameters["lr"] for s in specs] == [0.004, 0.002]
    assert [s.recipe_obj().defaults["lr"] for s in specs] == [0.004, 0.002]  # what the runner builds from
    assert resolve_run_spec(RunConfig(task="digits", recipe=str(first), out=tmp_path / "r")).hyperparameters["lr"] \
        == 0.004  # loaded again: still its own
    clash = tmp_path / "clash.py"
    clash.write_text(source.replace('RECIPES.add("digits_wide"', 'RECIPES.add("digits"')
                     .replace('name="digits_wide"', 'name="digits"'))
    with pytest.raises(ConfigError, match="registered twice"):
        resolve_run_spec(RunConfig(task="digits", recipe=str(clash), out=tmp_path / "r"))


def test_python_api_returns_the_run_result(tmp_path):
    result = daybreak.run("digits", overrides={"epochs": 2}, full_schedule=True, out=tmp_path / "r", seed=1)
    assert result.task == "digits" and result.seed == 1 and len(result.history) == 2
    assert result.hyperparameters["epochs"] == 2 and (tmp_path / "r" / "result.json").exists()
    with pytest.raises(ConfigError):
        daybreak.run("digits", overrides={"lr": -1.0}, out=tmp_path / "bad")


def test_run_spec_is_resolved_once_and_round_trips(tmp_path):
    spec = resolve_run_spec(RunConfig(task="digits", overrides={"epochs": 3}, target=0.9, rules="mlperf",
                                      out=tmp_path / "r"), world_size=2)
    assert spec.per_device_batch_size == 32 and spec.global_batch_size == 64 and spec.lr_scale == 1.0
    assert spec.hyperparameters["epochs"] == 3 and spec.target == 0.9 and not spec.target_is_default
    again = RunSpec.model_validate_json(spec.model_dump_json())  # what a torchrun worker receives
    assert again == spec
    with pytest.raises(Exception):
        spec.seed = 5  # frozen
    assert spec.with_(seed=5).seed == 5 and spec.seed == 0
