"""The timed runner on the digits task: record contents, clock rules, statuses, views (TSV, JSON, mllog)."""

import csv
import json
import math
from pathlib import Path

import pytest
import torch
from mlperf_logging.compliance_checker.mlp_parser import ruleset_610 as mlp_parser

from daybreak.cli import main
from daybreak.records.run import RunResult
from daybreak.tasks.evaluate import evaluate
from daybreak.train.runner import RunConfig, run

from conftest import single_line

DAWNBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "dawnbench-entries"


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "digits"
    result = run(RunConfig(out=out, quiet=True, cost_per_hour=3.6, command=["pytest"]))
    return out, result


def test_digits_reaches_target_and_records_it(digits_run):
    out, result = digits_run
    assert result.status == "reached" and result.reached
    first_hit = next(h for h in result.history if h.accuracy >= 0.98)
    # time-to-target is the training clock at the first evaluation at/above target, and the run stopped there
    assert result.time_to_target_s == first_hit.elapsed_s
    assert result.history[-1] is first_hit or result.history[-1] == first_hit
    assert result.epochs_to_target == first_hit.epoch
    assert all(h.accuracy < 0.98 for h in result.history[:-1])
    # cost = hours x price
    assert result.cost_usd == pytest.approx(result.time_to_target_s / 3600 * 3.6, rel=1e-12)
    # clock bookkeeping: eval excluded by default, init recorded separately, everything inside total
    assert result.clock.eval_included is False
    assert result.init_s > 0 and result.eval_s == pytest.approx(sum(h.eval_s for h in result.history))
    assert result.total_s > result.init_s + result.train_s + result.eval_s * 0.99
    assert result.system.torch == torch.__version__ and result.system.cpu_model
    # the file on disk is the same record
    assert RunResult.load(out) == result
    assert result.official and result.target == 0.98 and result.seed == 0


def test_checkpoint_is_the_model_at_first_target(digits_run):
    out, result = digits_run
    from daybreak.recipes import get_recipe
    from daybreak.tasks import get_task

    ckpt = torch.load(out / "checkpoint.pt", weights_only=True)
    assert ckpt["task"] == "digits" and ckpt["accuracy"] == result.history[-1].accuracy
    data = get_task("digits").load(None, False, False)
    setup = get_recipe("digits").build(ckpt["hyperparameters"], data, torch.device("cpu"))
    setup.model.load_state_dict(ckpt["state_dict"])
    top1, _ = evaluate(setup.model, setup.prepare(data.eval_x), data.eval_y, device=torch.device("cpu"))
    assert top1 == ckpt["accuracy"]


def test_dawnbench_views_have_the_competition_format(digits_run):
    out, result = digits_run
    rows = list(csv.reader((out / "dawnbench.tsv").read_text().splitlines(), delimiter="\t"))
    assert rows[0] == ["epoch", "hours", "top1Accuracy"]
    assert len(rows) == len(result.history) + 1
    for row, h in zip(rows[1:], result.history):
        assert int(row[0]) == h.epoch
        assert float(row[1]) == pytest.approx(h.clock_s["dawnbench"] / 3600, abs=1e-8)  # DAWNBench's rules
        assert float(row[2]) == pytest.approx(h.top1 * 100, abs=0.005)
    hours = [float(r[1]) for r in rows[1:]]
    assert hours == sorted(hours)
    sub = json.loads((out / "dawnbench.json").read_text())
    assert sub["costPerHour"] == 3.6 and sub["version"] == "v1.0"
    expected = {"version", "author", "authorEmail", "framework", "codeURL", "model", "hardware", "costPerHour", "timestamp", "misc"}
    assert set(sub) == expected
    if DAWNBENCH.exists():  # the same top-level fields as the real competition files
        real = json.loads((DAWNBENCH / "CIFAR10/train/davidcpage_resnet9_1v100-ec2_pytorch.json").read_text())
        assert set(real) == expected


def test_mllog_parses_with_mlperf_logging(digits_run):
    out, result = digits_run
    lines, errors = mlp_parser.parse_file(str(out / "mllog.log"))
    assert errors == []
    keys = [ll.key for ll in lines]
    for key in ("init_start", "init_stop", "run_start", "epoch_start", "epoch_stop", "eval_start", "eval_stop",
                "eval_accuracy", "run_stop", "submission_benchmark", "submission_org", "submission_division",
                "submission_status", "submission_platform", "seed", "global_batch_size"):
        assert key in keys, key
    assert keys.index("init_stop") < keys.index("run_start") < keys.index("eval_accuracy") < keys.index("run_stop")
    accs = [ll.value["value"] for ll in lines if ll.key == "eval_accuracy"]
    assert accs == [h.accuracy for h in result.history]
    assert [ll.value["metadata"]["epoch_num"] for ll in lines if ll.key == "eval_accuracy"] == [h.epoch for h in result.history]
    stop = [ll for ll in lines if ll.key == "run_stop"][0]
    assert stop.value["metadata"]["status"] == "success"
    assert keys.count("epoch_start") == keys.count("epoch_stop")


def test_same_seed_same_run_different_seed_differs(tmp_path):
    a = run(RunConfig(out=tmp_path / "a", quiet=True, seed=7, full_schedule=True, overrides={"epochs": 2}))
    b = run(RunConfig(out=tmp_path / "b", quiet=True, seed=7, full_schedule=True, overrides={"epochs": 2}))
    c = run(RunConfig(out=tmp_path / "c", quiet=True, seed=8, full_schedule=True, overrides={"epochs": 2}))
    assert [h.accuracy for h in a.history] == [h.accuracy for h in b.history]
    assert [h.train_loss for h in a.history] == [h.train_loss for h in b.history]
    assert [h.train_loss for h in a.history] != [h.train_loss for h in c.history]


def test_full_schedule_and_eval_every_steps(tmp_path):
    r = run(RunConfig(out=tmp_path / "r", quiet=True, full_schedule=True, eval_every_steps=7, overrides={"epochs": 2}))
    steps_per_epoch = 1347 // 64
    assert [h.step for h in r.history] == [7, 14, 21, 28, 35, 42]
    assert [h.epoch for h in r.history] == [s / steps_per_epoch for s in (7, 14, 21, 28, 35, 42)]
    assert r.status in ("reached", "not_reached")
    tsv = (tmp_path / "r" / "dawnbench.tsv").read_text().splitlines()
    assert tsv[1].split("\t")[0] == f"{7 / steps_per_epoch:.4f}"


def test_mlperf_headline_charges_evaluation_time(tmp_path):
    r = run(RunConfig(out=tmp_path / "r", quiet=True, rules="mlperf"))
    assert r.rules == "mlperf" and r.clock.eval_included and r.clock.checkpoint_included
    # the clock at each evaluation includes every evaluation so far (MLPerf never pauses)
    assert r.history[-1].elapsed_s >= sum(h.eval_s for h in r.history)
    assert r.time_to_target_s == r.history[-1].elapsed_s == r.clocks["mlperf"].time_to_target_s
    # the DAWNBench figure is recorded too (init counted, evaluations and records not), and the DAWNBench view
    # uses it whatever the headline
    dawn, ml = r.clocks["dawnbench"], r.clocks["mlperf"]
    init_before = ml.start_s - dawn.start_s  # model init + warm-up before the data: outside MLPerf's clock
    assert init_before > 0 and set(dawn.excluded_s) == {"eval", "record"}
    assert dawn.time_to_target_s == pytest.approx(ml.time_to_target_s + init_before - sum(dawn.excluded_s.values()),
                                                  abs=1e-6)
    tsv = (tmp_path / "r" / "dawnbench.tsv").read_text().splitlines()
    assert float(tsv[-1].split("\t")[1]) == pytest.approx(r.clocks["dawnbench"].time_to_target_s / 3600, abs=1e-8)


def test_bf16_autocast_on_cpu(tmp_path):
    r = run(RunConfig(out=tmp_path / "r", quiet=True, amp="bf16"))
    assert r.amp == "bf16" and r.status == "reached"
    assert all(math.isfinite(h.train_loss) for h in r.history)


def test_not_reached_exit_status_and_message(tmp_path, capsys):
    code = main(["run", "--target", "99.9%", "--set", "epochs=1", "--out", str(tmp_path / "r"), "-q"])
    assert code == 3
    err = capsys.readouterr().err
    assert single_line(err) and "below the target" in err
    r = RunResult.load(tmp_path / "r")
    assert r.status == "not_reached" and not r.reached and r.time_to_target_s is None
    assert not r.official and r.target == pytest.approx(0.999)
    assert not (tmp_path / "r" / "checkpoint.pt").exists()


def test_nan_loss_ends_run_as_diverged(tmp_path, capsys):
    code = main(["run", "--set", "lr=1e30", "--out", str(tmp_path / "r"), "-q"])
    assert code == 4
    err = capsys.readouterr().err
    assert single_line(err) and "diverged" in err
    r = RunResult.load(tmp_path / "r")
    (seen,) = r.non_finite_loss
    assert r.status == "diverged" and seen.diverged and not seen.weights_finite and seen.loss in ("nan", "inf")
    assert r.message == f"training diverged: {seen.summary}" and seen.summary in err
    assert seen.summary.startswith(f"loss {seen.loss} by step {seen.step}, weights non-finite")
    lines, errors = mlp_parser.parse_file(str(tmp_path / "r" / "mllog.log"))
    assert errors == [] and lines[-1].key == "run_stop" and lines[-1].value["metadata"]["status"] == "aborted"


# A user's recipe whose network hands out fp16 logits and sums its label-smoothed loss in fp16, as airbench does:
# at batch 512 with logit gaps of tens the smoothing term passes 65,504 and the loss value is inf, while the
# gradient (softmax - target, per example) stays finite and small. The weights move slowly (lr 1e-4): they stay
# finite, so the run must go on, not stop "diverged".
FP16_SUM_RECIPE = """
import torch
import torch.nn.functional as F
from daybreak.recipes import RECIPES, Recipe, TrainSetup

HYPERPARAMETERS = dict(batch_size=512, epochs=2, lr=1e-4, logit_scale=40.0)


class Half(torch.nn.Module):
    def __init__(self, classes, scale):
        super().__init__()
        self.lin, self.scale = torch.nn.Linear(64, classes), scale

    def forward(self, x):
        return (self.lin(x.flatten(1)) * self.scale).half()  # fp16 logits, like airbench's fp16 network's


def build(hp, data, device):
    torch.manual_seed(0)
    model = Half(data.num_classes, hp["logit_scale"]).to(device)
    return TrainSetup(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=hp["lr"]),
                      lr_multiplier=lambda step, total: 1.0,
                      loss_fn=lambda logits, y: F.cross_entropy(logits, y, label_smoothing=0.2, reduction="sum"),
                      prepare=lambda x: x.float() / 16.0)


RECIPES.add("fp16_sum", Recipe(name="fp16_sum", task="digits", model="digits_cnn", summary="test: fp16 summed loss",
                               defaults=HYPERPARAMETERS, build=build))
"""


def test_an_inf_loss_with_finite_weights_is_recorded_not_called_diverged(tmp_path, capsys):
    recipe = tmp_path / "fp16_sum.py"
    recipe.write_text(FP16_SUM_RECIPE)
    code = main(["run", "digits", "--recipe", str(recipe), "--target", "0.999", "--full-schedule",
                 "--out", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    r = RunResult.load(tmp_path / "r")
    assert code == 3 and r.status == "not_reached" and len(r.history) == 2  # trained both epochs
    assert len(r.non_finite_loss) == 2 and all(h.train_loss is None for h in r.history)
    seen = r.non_finite_loss[0]
    assert (seen.loss, seen.weights_finite, seen.gradients_finite, seen.optimizer_state_finite, seen.diverged) == (
        "inf", True, True, True, False)
    assert seen.step == r.steps_per_epoch and seen.steps_summed == r.steps_per_epoch
    assert seen.float32_loss_finite and 0 < seen.float32_loss < math.inf  # float32 holds what fp16 cannot
    assert seen.summary == f"loss inf by step {seen.step}, weights finite, float32 loss {seen.float32_loss:.6g}"
    (warning,) = [w for w in r.warnings if seen.summary in w]
    assert "the training state was" in warning and "cross_entropy_float32" in warning
    assert f"WARNING          {warning}" in out and single_line(err) and "below the target" in err


def _state(weight=1.0, grad=0.1, momentum=0.0):
    from daybreak.recipes import TrainSetup

    model = torch.nn.Linear(2, 3)
    with torch.no_grad():
        model.weight.fill_(weight)
    model.weight.grad = torch.full_like(model.weight, grad)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt.state[model.weight]["momentum_buffer"] = torch.full_like(model.weight, momentum)
    return TrainSetup(model=model, optimizer=opt, lr_multiplier=lambda s, t: 1.0, prepare=lambda x: x,
                      loss_fn=lambda logits, y: torch.nn.functional.cross_entropy(logits, y, reduction="sum"))


@pytest.mark.parametrize("setup, loss, scaler, batch_scale, diverged, summary", [
    (dict(), math.inf, False, 1.0, False, "loss inf at step 4, weights finite, float32 loss "),
    (dict(), math.nan, False, 1.0, False, "loss nan at step 4, weights finite, float32 loss "),
    (dict(weight=math.nan), math.nan, False, 1.0, True, "loss nan at step 4, weights non-finite, float32 loss nan too"),
    (dict(grad=math.inf), math.inf, False, 1.0, True, "loss inf at step 4, weights finite, gradients non-finite, "),
    (dict(grad=math.inf), math.inf, True, 1.0, False,
     "loss inf at step 4, weights finite, gradients non-finite (the loss scaler skips such steps), float32 loss "),
    (dict(momentum=math.nan), math.nan, False, 1.0, True, "loss nan at step 4, weights finite, optimizer state "),
    (dict(), math.inf, False, math.inf, True, "loss inf at step 4, weights finite, float32 loss nan too"),
])
def test_the_verdict_on_a_non_finite_loss_says_what_was_non_finite(setup, loss, scaler, batch_scale, diverged,
                                                                   summary):
    from contextlib import nullcontext

    from daybreak.train.divergence import inspect

    state = _state(**setup)
    batch = (torch.ones(5, 2) * batch_scale, torch.arange(5) % 3)
    seen = inspect(loss, 4, 1, state, scaler_skips=scaler, batch=batch, autocast=nullcontext())
    assert seen.diverged is diverged and seen.summary.startswith(summary), seen.summary
    assert seen.loss == ("nan" if math.isnan(loss) else "inf")
    if not diverged:
        with torch.no_grad():
            assert seen.float32_loss == pytest.approx(float(state.loss_fn(state.model(batch[0]), batch[1])))
    assert inspect(loss, 12, 3, state, scaler_skips=scaler, batch=None, autocast=nullcontext()).summary.startswith(
        summary.split(", float32")[0].rstrip(", ").replace("at step 4", "by step 12"))


@pytest.mark.parametrize("argv, fragment", [
    (["run", "nosuchtask"], "unknown task"),
    (["run", "--recipe", "nosuch"], "unknown recipe"),
    (["run", "--recipe", "mnist"], "is for task mnist"),
    (["run", "--set", "lr"], "KEY=VALUE"),
    (["run", "--set", "epochs=many"], "expected an integer"),
    (["run", "--set", "nosuch=1"], "unknown hyperparameter"),
    (["run", "--target", "0"], "--target"),
    (["run", "--target", "101"], "--target"),
    (["run", "--device", "cuda"], "CUDA is not available"),
    (["run", "--device", "tpu"], "--device"),
    (["run", "--cost-per-hour", "1", "--instance", "aws-p3.2xlarge"], "not both"),
    (["run", "--instance", "nosuch"], "not in the price catalog"),
    (["run", "--cost-per-hour", "-1"], "--cost-per-hour"),
    (["run", "--threads", "0"], "--threads"),
    (["run", "mnist", "--no-download"], "not found"),
    (["show", "/nonexistent/run"], "no result.json"),
])
def test_user_errors_are_one_line(argv, fragment, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a failed start without --out writes runs/ here, never in the repository
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert single_line(err) and fragment in err, err


def test_out_dir_never_overwritten(tmp_path, capsys):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "result.json").write_text("{}")
    assert main(["run", "--out", str(tmp_path / "r"), "-q"]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (tmp_path / "r" / "result.json").read_text() == "{}"


def test_show_and_listing_commands(digits_run, capsys):
    out, result = digits_run
    assert main(["show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "REACHED" in text and f"{result.time_to_target_s:.3f} s" in text
    assert main(["tasks"]) == 0
    text = capsys.readouterr().out
    assert "digits" in text and "98% top-1" in text and "cifar10" in text and "94% top-1" in text and "99% top-1" in text
    assert "F1 0.75" in text and "93% top-5" in text and "digits (reference)" in text
    assert main(["recipes", "digits"]) == 0
    assert '"batch_size": 64' in capsys.readouterr().out
    assert main(["instances"]) == 0
    assert "aws-p3.2xlarge" in capsys.readouterr().out


def test_instance_price_from_catalog(tmp_path):
    from daybreak.pricing import catalog

    r = run(RunConfig(out=tmp_path / "r", quiet=True, instance="gcp-e2-standard-2"))
    item = catalog()["gcp-e2-standard-2"]
    assert r.cost_per_hour == item.usd_per_hour and r.price_date == item.price_date
    assert r.cost_usd == pytest.approx(r.time_to_target_s / 3600 * item.usd_per_hour)


def test_custom_batches_and_evaluator_plug_into_the_runner(tmp_path, monkeypatch):
    """A task with its own batch source and metric (as SQuAD/ImageNet use) runs through the same loop."""
    import dataclasses

    from daybreak.data.digits import load_digits_task
    from daybreak.tasks import TASKS
    from daybreak.tasks.batches import InMemoryBatches, InMemoryClassification

    calls = {"start": 0, "epochs": 0}

    class CountingBatches(InMemoryBatches):
        def start(self):
            calls["start"] += 1
            super().start()

        def epoch(self, epoch):
            calls["epochs"] += 1
            yield from super().epoch(epoch)

    inner = {}

    def make_evaluator(data, plan):
        # a made-up "f1" metric: half the top-1 accuracy, so the target 0.45 means top-1 >= 90%
        inner["e"] = InMemoryClassification(data, plan, top5=False)
        return lambda model: {"f1": inner["e"](model)["top1"] / 2, "exact_match": 0.0}

    from daybreak.metrics import F1

    task = TASKS.get("digits")
    custom = dataclasses.replace(task, metric=F1, target=0.45, load=lambda d, a, dl: load_digits_task(),
                                 make_train_batches=lambda data, plan: CountingBatches(data, plan),
                                 make_evaluator=make_evaluator)
    with TASKS.override("digits", custom):
        r = run(RunConfig(out=tmp_path / "r", quiet=True))
    assert r.reached and r.metric == "f1" and calls["start"] == 1 and calls["epochs"] == len(r.history)
    assert r.history[-1].metrics["f1"] == r.history[-1].accuracy >= 0.45 and r.history[-1].top1 is None
    rows = (tmp_path / "r" / "dawnbench.tsv").read_text().splitlines()
    assert rows[0] == "epoch\thours\tf1Score"
    assert float(rows[-1].split("\t")[2]) == pytest.approx(r.history[-1].accuracy, abs=1e-6)


def test_cost_line_says_why_there_is_no_cost(tmp_path, capsys):
    """A price given but the target not reached: the summary says so (it used to ask for --instance)."""
    assert main(["run", "--instance", "gcp-e2-standard-2", "--target", "0.999", "--set", "epochs=1",
                 "--out", str(tmp_path / "r")]) == 3
    out = capsys.readouterr().out
    assert "cost to target   - (the target was not reached; price $" in out and "gcp-e2-standard-2" in out
    assert "pass --cost-per-hour" not in out


def test_nothing_is_read_or_written_inside_a_train_interval(fake_rapl, tmp_path, monkeypatch):
    # issue 37: each train interval opened with an energy read and an mllog line, and two more lines (epoch_stop,
    # epoch_start) fell inside it. Now the read precedes the interval's timestamp and the lines are written after it
    # ends, each with the instant it was called at.
    import time

    import daybreak.train.runner as runner_module
    from daybreak.measure.energy import EnergyMeter
    from daybreak.records.mllog import RunMllog
    from daybreak.train.clock import Timeline

    timelines, events = [], []

    class Recorded(Timeline):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            timelines.append(self)

    def spy(name, original):
        def wrapper(self, *args, **kwargs):
            events.append((name, args[0] if args and name != "read" else name, time.perf_counter_ns()))
            return original(self, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(runner_module, "Timeline", Recorded)
    monkeypatch.setattr(EnergyMeter, "read", spy("read", EnergyMeter.read))
    for method in ("start", "end", "event"):
        monkeypatch.setattr(RunMllog, method, spy(method, getattr(RunMllog, method)))
    r = run(RunConfig(out=tmp_path / "r", quiet=True, overrides={"epochs": 3}, full_schedule=True,
                      idle_power_s=0))
    (timeline,) = timelines
    train = [(p.start_s, p.end_s) for p in r.phases if p.phase == "train"]
    assert len(train) == 3 and r.energy.available
    at = [(name, key, (ns - timeline.origin_ns) / 1e9) for name, key, ns in events]
    inside = [(name, key) for name, key, t in at if any(a < t < b for a, b in train)]
    assert inside == []
    assert sum(1 for name, key, t in at if name == "read") >= 2 * len(train)  # a read at every boundary still
    text = (tmp_path / "r" / "mllog.log").read_text()
    lines, errors = mlp_parser.parse_file(str(tmp_path / "r" / "mllog.log"))
    assert errors == [] and [ll.key for ll in lines].count("epoch_start") == 3
    starts = [ll.timestamp for ll in lines if ll.key == "epoch_start"]  # the instants they were called at: inside
    origin_ms = timeline.epoch_ms(0.0)
    assert all(any(a <= (s - origin_ms) / 1e3 + 1e-6 and (s - origin_ms) / 1e3 <= b + 1e-6 for a, b in train)
               for s in starts), (starts, train)
    assert text.count("power_reading") >= 2 * len(train)
