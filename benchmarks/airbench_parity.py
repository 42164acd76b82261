"""airbench parity, as an experiment: airbench's own script and daybreak's matching recipe, each side a fresh process.

    python benchmarks/airbench_parity.py --airbench ~/src/cifar10-airbench/legacy/airbench94.py --data-dir DIR
    python benchmarks/airbench_parity.py --airbench airbench94_muon.py --data-dir DIR --pairs 7 --compile off
    python benchmarks/airbench_parity.py --airbench airbench94_muon.py --data-dir DIR --side airbench --record-loss

The script is recognised from what it defines (``SCRIPT_KINDS``), and paired with daybreak's recipe of the same
method and the compile mode its own ``__main__`` uses: ``legacy/airbench94.py`` (SGD; ``hyp`` with 9.9 epochs and
a 64-wide first block; ``main(run)``) with recipe ``cifar10``, eager; ``airbench94_muon.py`` (a ``Muon`` optimizer
class; ``main(run, model)``) with ``cifar10_muon``, ``max-autotune``; ``legacy/airbench96.py`` (37 epochs, a
128-wide first block) with ``cifar10_96``, eager. Any other script, or a ``--recipe`` that does not match the
script, is refused in one line (``--compile`` may still override the compile mode for both sides).

``--airbench`` is the path of an airbench script you have (KellerJordan/cifar10-airbench: ``legacy/airbench94.py``,
``airbench94_muon.py``, ...); daybreak never ships it. ``--data-dir`` holds CIFAR-10 in the python distribution's
format (real, or written by ``daybreak.data.synthetic.write_cifar10``): it is read by daybreak's reader and written
in airbench's own format (``cifar10/train.pt``, ``test.pt``: uint8 N x 32 x 32 x 3 images and labels) into a work
folder the script runs in, so both train on the same images.

What runs (the default): ``--pairs`` pairs (at least 5 by default), each one fresh process per side, the order
alternating ABBA (airbench first in pair 1, daybreak first in pair 2, ...) so that drift of the machine hits both
alike. The airbench side is this file again (``--side airbench``): it imports the script (its ``__main__`` block
does not run), calls its ``main`` once untimed (airbench's own ``"warmup"`` run) and once timed, as the script's
``__main__`` does; the daybreak side is ``daybreak run cifar10 --recipe R --full-schedule`` (its own warm-up, then
the whole schedule). Both get the same device and ``--threads`` (checked from what each side reports), and each
trial records the machine's load (and is flagged when other processes were busy). airbench's time per epoch is
the difference of its own cumulative ``..._time_seconds`` column (CUDA events around each epoch's training; its
first epoch includes its whitening); daybreak's is each epoch's ``train`` phase in its record (the first includes
preparing the data and the whitening). The figure is the ratio daybreak / airbench of the total training time
(goal, issue 21: <= 1.05) with a confidence interval, from the same paired statistics as ``daybreak ab``
(daybreak.analysis.paired: the geometric mean of the per-pair ratios, a Student-t interval of the mean log ratio);
beside it each epoch's median on both sides and, on real CIFAR-10 (the official checksums), both accuracies.

``--in-process`` is the old design, kept only when asked for and labelled so: both sides in this process,
daybreak always second, one untimed run of each first; no interval (an H200 gave 1.244x this way, while fresh
processes gave 0.97x: ``benchmarks/results/README.md``). ``--side airbench`` runs airbench's side alone (one
fresh process: its warm-up run and one timed run); with ``--record-loss`` it also records the loss airbench
computes at every step (its own fp16 value and the same loss on float32 logits, read after the run, so no step
waits for them). ``--out DIR`` writes ``parity.json``. ``--dry-run`` checks everything without training: the data
converts, the script imports and has ``main``, and the commands of the pairs are printed.

torchvision: airbench imports it for ``T.Normalize`` (and to download CIFAR-10, not needed here). When torchvision
is not installed, a stand-in module with exactly those two names is put in its place (``_torchvision_shim``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import io
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from daybreak.errors import DaybreakError
from daybreak.records.run import RunResult
from daybreak.tasks import get_task

REPO = Path(__file__).resolve().parents[1]
GOAL_RATIO = 1.05  # issue 21: daybreak's cifar10 within 1.05x of airbench per epoch on the same GPU


@dataclass(frozen=True)
class ScriptKind:
    """An airbench script daybreak has a recipe for: how it is recognised, and what it is paired with."""

    name: str
    recipe: str  # daybreak's recipe of the same method
    compile: str  # the torch.compile mode of the script's own __main__ ("off": it runs eagerly)
    main_parameters: tuple[str, ...]  # the signature of its main()
    muon: bool  # it defines a Muon optimizer class
    train_epochs: float | None = None  # hyp["opt"]["train_epochs"]
    first_width: int | None = None  # hyp["net"]["widths"]["block1"]


SCRIPT_KINDS = (
    ScriptKind("airbench94_muon", "cifar10_muon", "max-autotune", ("run", "model"), muon=True),
    ScriptKind("airbench94", "cifar10", "off", ("run",), muon=False, train_epochs=9.9, first_width=64),
    ScriptKind("airbench96", "cifar10_96", "off", ("run",), muon=False, train_epochs=37.0, first_width=128),
)


def identify(module: types.ModuleType, path: Path) -> ScriptKind:
    """Which airbench script ``module`` is, from what it defines; one ParityError line when it is none of them."""
    params = tuple(inspect.signature(module.main).parameters)
    muon_class = getattr(module, "Muon", None)
    muon = isinstance(muon_class, type) and issubclass(muon_class, torch.optim.Optimizer)
    hyp = getattr(module, "hyp", None)
    opt = hyp.get("opt", {}) if isinstance(hyp, dict) else {}
    widths = hyp.get("net", {}).get("widths", {}) if isinstance(hyp, dict) else {}
    for kind in SCRIPT_KINDS:
        if params != kind.main_parameters or muon != kind.muon:
            continue
        if kind.train_epochs is not None and (opt.get("train_epochs") != kind.train_epochs
                                              or widths.get("block1") != kind.first_width):
            continue
        return kind
    known = "; ".join(f"{k.name} ({k.recipe})" for k in SCRIPT_KINDS)
    raise ParityError(f"--airbench {path.name}: not an airbench script daybreak has a recipe for (main{params}, "
                      f"Muon optimizer: {'yes' if muon else 'no'}, train_epochs {opt.get('train_epochs')}, first "
                      f"width {widths.get('block1')}); known: {known}")
CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


class ParityError(DaybreakError):
    """A script or data folder that cannot be used (one line, exit 2)."""


def _torchvision_shim() -> types.ModuleType:
    """The two torchvision names airbench uses: ``transforms.Normalize`` (per-channel, on N x C x H x W tensors)
    and ``datasets.CIFAR10`` (only for a download, which never happens here: the data is already in place)."""

    class Normalize:
        def __init__(self, mean: Any, std: Any):
            self.mean, self.std = torch.as_tensor(mean), torch.as_tensor(std)

        def __call__(self, x: torch.Tensor) -> torch.Tensor:
            shape = (-1, 1, 1)
            return (x - self.mean.to(x).view(shape)) / self.std.to(x).view(shape)

    class CIFAR10:
        def __init__(self, *args: Any, **kwargs: Any):
            raise RuntimeError("the torchvision stand-in cannot download CIFAR-10; the parity tool writes "
                               "cifar10/train.pt itself")

    tv = types.ModuleType("torchvision")
    tv.transforms = types.ModuleType("torchvision.transforms")  # type: ignore[attr-defined]
    tv.transforms.Normalize = Normalize  # type: ignore[attr-defined]
    tv.datasets = types.ModuleType("torchvision.datasets")  # type: ignore[attr-defined]
    tv.datasets.CIFAR10 = CIFAR10  # type: ignore[attr-defined]
    return tv


SHIM_NAMES = ("torchvision", "torchvision.transforms", "torchvision.datasets")


@contextlib.contextmanager
def torchvision_available():
    """Yields what airbench's ``import torchvision`` gets: the installed torchvision, or the stand-in, registered
    for the duration only."""
    try:
        import torchvision

        yield f"torchvision {torchvision.__version__}"
        return
    except ImportError:
        pass
    shim = _torchvision_shim()
    sys.modules.update(dict(zip(SHIM_NAMES, (shim, shim.transforms, shim.datasets))))
    try:
        yield "a torchvision stand-in (Normalize only; torchvision is not installed)"
    finally:
        for name in SHIM_NAMES:
            sys.modules.pop(name, None)


def write_airbench_data(data: Any, folder: Path) -> Path:
    """daybreak's CIFAR tensors (N x 3 x 32 x 32 uint8) -> airbench's ``cifar10/{train,test}.pt``."""
    target = folder / "cifar10"
    target.mkdir(parents=True, exist_ok=True)
    for name, x, y in (("train.pt", data.train_x, data.train_y), ("test.pt", data.eval_x, data.eval_y)):
        images = x.permute(0, 2, 3, 1).contiguous()  # airbench stores N x H x W x C, as torchvision gives it
        torch.save({"images": images, "labels": y.to(torch.int64), "classes": CLASSES}, target / name)
    return target


@contextlib.contextmanager
def inside(folder: Path):
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def load_script(path: Path, workdir: Path) -> types.ModuleType:
    """Import the user's airbench script as a module (so its ``__main__`` block does not run)."""
    if not path.is_file():
        raise ParityError(f"--airbench {path}: no such file (give the path of your airbench script)")
    spec = importlib.util.spec_from_file_location("airbench_under_test", path)
    if spec is None or spec.loader is None:
        raise ParityError(f"--airbench {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    argv0 = sys.argv[0]
    sys.argv[0] = str(path)  # some scripts read their own source at import (open(sys.argv[0])) to log it
    with inside(workdir):
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001 - the user's script: one line
            raise ParityError(f"--airbench {path}: importing it failed: {type(e).__name__}: {e}") from None
        finally:
            sys.argv[0] = argv0
    if not callable(getattr(module, "main", None)):
        raise ParityError(f"--airbench {path}: has no main(run) function (is it an airbench training script?)")
    return module


def parse_table(text: str, columns: list[str] | None = None) -> tuple[list[float], float | None]:
    """airbench's printed table -> (cumulative training seconds at the end of each epoch, the final TTA accuracy
    row's value if printed). The time column is the one whose header ends in ``time_seconds``. airbench prints
    its header row in ``__main__`` only, which an imported script does not run: ``columns`` (the script's
    ``logging_columns_list``) stands for it then."""
    header: list[str] | None = [c.strip() for c in columns] if columns else None
    times: list[float] = []
    tta: float | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if any(c.endswith("time_seconds") for c in cells):  # a printed header row
            header = cells
            continue
        if header is None or len(cells) != len(header):
            continue
        row = dict(zip(header, cells))
        t = next((row[k] for k in header if k.endswith("time_seconds")), "")
        if row.get("epoch", "").isdigit() and t:
            times.append(float(t))
        elif row.get("epoch") == "eval" and row.get("tta_val_acc"):
            tta = float(row["tta_val_acc"])
    return times, tta


def per_epoch(cumulative: list[float]) -> list[float]:
    return [b - a for a, b in zip([0.0] + cumulative[:-1], cumulative)]


class LossRecorder:
    """Records every training loss the script computes: ``torch.nn.functional.cross_entropy`` is wrapped for the
    duration (``F.cross_entropy`` and ``nn.CrossEntropyLoss`` both call it), each result kept on the device
    (detached; per-example losses summed in their own dtype, as airbench94 then does) with the same loss on float32
    logits beside it, and read after the run (no step waits)."""

    def __init__(self) -> None:
        self.values: list[torch.Tensor] = []
        self.float32: list[torch.Tensor] = []
        self._original: Any = None

    def __enter__(self) -> "LossRecorder":
        functional = torch.nn.functional
        self._original = original = functional.cross_entropy

        def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            loss = original(logits, labels, *args, **kwargs)
            if torch.is_grad_enabled():  # the training loss, not an evaluation's
                with torch.no_grad():
                    self.values.append(loss.detach().sum())
                    self.float32.append(original(logits.detach().float(), labels, *args, **kwargs).sum())
            return loss

        functional.cross_entropy = cross_entropy
        return self

    def __exit__(self, *exc: Any) -> None:
        torch.nn.functional.cross_entropy = self._original

    def summary(self) -> dict[str, Any]:
        """Per step: the script's own loss value and the float32 one; counts of the non-finite ones."""
        own = [float(v.float().item()) for v in self.values]
        f32 = [float(v.item()) for v in self.float32]
        bad = [i + 1 for i, v in enumerate(own) if not math.isfinite(v)]
        return {"steps": len(own), "dtype": str(self.values[0].dtype).replace("torch.", "") if self.values else None,
                "non_finite_steps": len(bad), "first_non_finite_step": bad[0] if bad else None,
                "float32_non_finite_steps": sum(1 for v in f32 if not math.isfinite(v)),
                "float32_max": max((v for v in f32 if math.isfinite(v)), default=None),
                "own": [v if math.isfinite(v) else str(v) for v in own], "float32": f32}


class Airbench:
    """Calls the script's ``main`` the way its own ``__main__`` does."""

    def __init__(self, module: types.ModuleType, workdir: Path, compile_mode: str, device: str = "cuda"):
        self.module, self.workdir, self.compile_mode = module, workdir, compile_mode
        self.model = None
        if "model" in inspect.signature(module.main).parameters:  # airbench94_muon: main(run, model)
            if not hasattr(module, "CifarNet"):
                raise ParityError("the script's main(run, model) needs a model, and it defines no CifarNet")
            self.model = module.CifarNet().to(device, memory_format=torch.channels_last)
            if compile_mode != "off":
                self.model.compile(mode=None if compile_mode == "default" else compile_mode)

    def train(self, run_name: Any) -> tuple[list[float], float | None]:
        """(seconds per epoch, final accuracy) of one of airbench's training runs."""
        out = io.StringIO()
        with inside(self.workdir), contextlib.redirect_stdout(out):
            args = (run_name,) if self.model is None else (run_name, self.model)
            accuracy = self.module.main(*args)
        cumulative, tta = parse_table(out.getvalue(), getattr(self.module, "logging_columns_list", None))
        if not cumulative:
            raise ParityError("the script printed no per-epoch rows with a ..._time_seconds column")
        return per_epoch(cumulative), float(accuracy) if accuracy is not None else tta


def daybreak_epochs(result: RunResult) -> list[float]:
    """Seconds of each epoch's training phase: the train intervals between two evaluations (one per epoch)."""
    epochs: list[float] = []
    current = 0.0
    for p in result.phases:
        if p.phase == "train":
            current += p.end_s - p.start_s
        elif p.phase == "eval":
            epochs.append(current)
            current = 0.0
    return epochs


def _check_run(r: RunResult, recipe: str) -> None:
    if r.status in ("failed", "diverged", "interrupted", "running"):  # no epochs to compare
        raise ParityError(f"daybreak's {recipe} run {r.status}: {r.message} (no ratio to report)")


# --- one side in this process -------------------------------------------------------------------------------------

def device_report(device: str) -> dict[str, Any]:
    """What a side ran on: the device, its name, torch's CPU threads (compared between the sides)."""
    dev = torch.device(device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    return {"device": dev.type, "device_name": name, "threads": torch.get_num_threads()}


def airbench_side(args: argparse.Namespace, work: Path, kind: ScriptKind, module: types.ModuleType) -> dict[str, Any]:
    """``--side airbench``: the script's untimed warm-up run, then run ``--run-name`` timed, in this process."""
    from daybreak.measure.context import ContextSampler

    sampler = ContextSampler().start()  # this process's own view of the machine's load, as a daybreak run records
    if args.threads:
        torch.set_num_threads(args.threads)
    airbench = Airbench(module, work, args.compile, args.device)
    airbench.train("warmup")  # untimed, as airbench's own __main__ does first
    recorder = LossRecorder() if args.record_loss else None
    with recorder if recorder is not None else contextlib.nullcontext():  # the timed run's loss only
        epochs, accuracy = airbench.train(args.run_name)
    out: dict[str, Any] = {"side": "airbench", "script_kind": kind.name, "compile": args.compile,
                           "epoch_s": epochs, "total_s": sum(epochs), "accuracy": accuracy,
                           "context": sampler.stop(), "pid": os.getpid(), **device_report(args.device)}
    if recorder is not None:
        out["loss"] = recorder.summary()
    return out


def describe_loss(loss: dict[str, Any]) -> str:
    own = (f"{loss['non_finite_steps']} of {loss['steps']} steps non-finite (first at step "
           f"{loss['first_non_finite_step']})" if loss["non_finite_steps"] else f"finite at all {loss['steps']} steps")
    f32 = (f"finite at every step, at most {loss['float32_max']:.1f}" if not loss["float32_non_finite_steps"] else
           f"non-finite at {loss['float32_non_finite_steps']} steps")
    return f"airbench's own loss ({loss['dtype']}): {own}; the same loss on float32 logits: {f32}"


# --- fresh processes ------------------------------------------------------------------------------------------------

@dataclass
class Trial:
    pair: int
    side: str  # "airbench" or "daybreak"
    position: int  # 0 or 1 within the pair
    epoch_s: list[float]
    total_s: float
    accuracy: float | None
    device: str
    device_name: str
    threads: int
    seconds: float  # the whole process, start-up and warm-up included
    load_avg_before: list[float] | None  # as the side itself read it (daybreak.measure.context)
    busy_fraction: float | None  # other processes' share of the CPUs while it ran
    warnings: list[str]


def _env() -> dict[str, str]:
    """The children's environment: this one, with this checkout first on PYTHONPATH (the daybreak under test)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _run_child(cmd: list[str], timeout_s: float, what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=_env(), cwd=REPO)
    except subprocess.TimeoutExpired:
        raise ParityError(f"{what} did not finish within {timeout_s:.0f} s (--trial-timeout)") from None


def airbench_command(args: argparse.Namespace, work: Path, pair: int, result: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--airbench", str(args.airbench), "--data-dir",
            str(args.data_dir), "--side", "airbench", "--workdir", str(work), "--run-name", str(pair), "--device",
            args.device, "--compile", args.compile, "--threads", str(args.threads), "--result", str(result)]


def daybreak_command(args: argparse.Namespace, out: Path, seed: int) -> list[str]:
    overrides = [a for kv in args.set or [] for a in ("--set", kv)]
    return [sys.executable, "-m", "daybreak", "run", "cifar10", "--recipe", args.recipe, "--data-dir",
            str(args.data_dir), "--allow-custom-data", "--no-download", "--device", args.device, "--compile",
            args.compile, "--threads", str(args.threads), "--full-schedule", "--seed", str(seed), "--out", str(out),
            "-q", *overrides]


def run_trial(args: argparse.Namespace, work: Path, pair: int, side: str, position: int) -> Trial:
    t0 = time.perf_counter()
    if side == "airbench":
        result_file = work / f"airbench-{pair}.json"
        proc = _run_child(airbench_command(args, work, pair, result_file), args.trial_timeout,
                          f"airbench's run of pair {pair + 1}")
        if proc.returncode != 0 or not result_file.exists():
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
            raise ParityError(f"airbench's run of pair {pair + 1} failed: {last[0][:300]}")
        got = json.loads(result_file.read_text())
        context = got["context"]
    else:
        out = work / f"daybreak-{pair}"
        proc = _run_child(daybreak_command(args, out, seed=pair), args.trial_timeout,
                          f"daybreak's run of pair {pair + 1}")
        try:
            r = RunResult.load(out)
        except Exception:  # noqa: BLE001 - nothing recorded: the process's own last line says why
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
            raise ParityError(f"daybreak's run of pair {pair + 1} left no record: {last[0][:300]}") from None
        _check_run(r, args.recipe)
        epochs = daybreak_epochs(r)
        gpu = r.system.gpus[0].name if r.device.startswith("cuda") and r.system.gpus else "cpu"
        got = {"epoch_s": epochs, "total_s": sum(epochs), "accuracy": r.final_accuracy,
               "device": r.device.split(":")[0], "device_name": gpu, "threads": r.threads}
        context = r.context.model_dump()  # the run's own view of the machine's load
    return Trial(pair=pair, side=side, position=position, epoch_s=got["epoch_s"], total_s=got["total_s"],
                 accuracy=got["accuracy"], device=got["device"], device_name=got["device_name"],
                 threads=got["threads"], seconds=round(time.perf_counter() - t0, 3),
                 load_avg_before=context.get("load_avg_before"), busy_fraction=context.get("busy_fraction"),
                 warnings=list(context.get("warnings", [])))


def order_of(pair: int) -> tuple[str, str]:
    """ABBA...: airbench first in even pairs, daybreak first in odd ones."""
    return ("airbench", "daybreak") if pair % 2 == 0 else ("daybreak", "airbench")


def verify_same(trials: list[Trial]) -> None:
    """Both sides on the same device and threads, or one line saying what differed."""
    seen = {(t.device, t.device_name, t.threads) for t in trials}
    if len(seen) > 1:
        got = "; ".join(f"{t.side} pair {t.pair + 1}: {t.device} ({t.device_name}), {t.threads} threads"
                        for t in trials)
        raise ParityError(f"the sides did not run on the same device and threads: {got}")


def experiment(args: argparse.Namespace, work: Path) -> tuple[list[Trial], list[Trial]]:
    airbench, daybreak = [], []
    for pair in range(args.pairs):
        for position, side in enumerate(order_of(pair)):
            trial = run_trial(args, work, pair, side, position)
            (airbench if side == "airbench" else daybreak).append(trial)
            verify_same(airbench + daybreak)
            print(f"pair {pair + 1}/{args.pairs} {side}: {trial.total_s:.4f} s of training ({trial.seconds:.1f} s "
                  f"in all)", file=sys.stderr)
    return airbench, daybreak


def summarize(airbench: list[list[float]], daybreak: list[list[float]], acc_a: list, acc_d: list,
              official: bool, confidence: float | None) -> dict[str, Any]:
    """Per-epoch medians, and the ratio of the total training time over the common epochs: with its interval
    from daybreak.analysis.paired when ``confidence`` is given (fresh processes), else the median of the per-repeat
    ratios (the in-process mode)."""
    epochs = min(min(len(e) for e in airbench), min(len(e) for e in daybreak))
    rows = []
    for i in range(epochs):
        a = statistics.median(e[i] for e in airbench)
        d = statistics.median(e[i] for e in daybreak)
        rows.append({"epoch": i + 1, "airbench_s": a, "daybreak_s": d, "ratio": d / a if a > 0 else None})
    totals_a = [sum(e[:epochs]) for e in airbench]
    totals_d = [sum(e[:epochs]) for e in daybreak]
    totals = [d / a for a, d in zip(totals_a, totals_d) if a > 0]
    out: dict[str, Any] = {"epochs": rows, "repeats": len(totals), "epochs_compared": epochs,
                           "airbench_total_s": totals_a, "daybreak_total_s": totals_d,
                           "ratio_total": statistics.median(totals) if totals else None, "goal_ratio": GOAL_RATIO,
                           "real_data": official}
    if confidence is not None:
        from daybreak.analysis.paired import describe, paired_ratio

        est = paired_ratio(totals_a, totals_d, confidence=confidence, quantity="train_s")
        out.update(ratio_total=est.ratio, ratio=json.loads(est.model_dump_json()),
                   ratio_words=describe(est, "airbench", "daybreak", what="training time"),
                   within_goal=None if est.ci_high is None else est.ci_high <= GOAL_RATIO)
    if official:
        out["airbench_accuracy"] = statistics.mean(a for a in acc_a if a is not None) if any(acc_a) else None
        out["daybreak_accuracy"] = statistics.mean(a for a in acc_d if a is not None) if any(acc_d) else None
    return out


def print_summary(s: dict[str, Any], args: argparse.Namespace, torchvision: str) -> None:
    how = (f"{s['repeats']} pairs of fresh processes, order ABBA" if s["mode"] == "fresh-processes" else
           f"IN-PROCESS: {s['repeats']} repeat(s) of both sides in one process, daybreak always second (not an "
           "experiment: no interval)")
    print(f"airbench parity on {args.device}: {args.airbench.name} ({s['script_kind']}) vs daybreak {args.recipe} "
          f"(compile {args.compile}), {how}; {torchvision}")
    if s.get("daybreak_overrides"):
        print(f"daybreak's schedule changed by --set {' '.join(s['daybreak_overrides'])}: a rehearsal, not the parity")
    print(f"{'epoch':>5} {'airbench s':>11} {'daybreak s':>11} {'ratio':>7}   (medians)")
    for row in s["epochs"]:
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.3f}"
        print(f"{row['epoch']:>5} {row['airbench_s']:>11.4f} {row['daybreak_s']:>11.4f} {ratio:>7}")
    if s.get("ratio_words"):
        goal = ("within" if s["within_goal"] else "not shown within") if s["within_goal"] is not None else "vs"
        print(f"{s['ratio_words']} ({goal} the {GOAL_RATIO}x goal)")
    elif s["ratio_total"] is not None:
        verdict = "within" if s["ratio_total"] <= GOAL_RATIO else "ABOVE"
        print(f"training time ratio daybreak / airbench: {s['ratio_total']:.3f}x, median of the repeats' ratios "
              f"({verdict} the {GOAL_RATIO}x goal; in-process, no interval)")
    for warning in s.get("warnings", []):
        print(f"warning: {warning}")
    if s["real_data"]:
        a, d = s.get("airbench_accuracy"), s.get("daybreak_accuracy")
        print(f"accuracy: airbench {a * 100:.2f}%, daybreak {d * 100:.2f}%" if a is not None and d is not None
              else "accuracy: not reported by both")
    else:
        print("accuracy: not compared (synthetic data: the files do not match the official checksums)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python benchmarks/airbench_parity.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--airbench", type=Path, required=True, help="path of your airbench script (never vendored)")
    p.add_argument("--data-dir", type=Path, required=True, help="CIFAR-10 python distribution (real or synthetic)")
    p.add_argument("--recipe", help="daybreak's recipe to compare (default: the one of the script's method; "
                                    "another is refused)")
    p.add_argument("--pairs", type=int, default=5, help="pairs of fresh processes, order ABBA (default 5, at least 2)")
    p.add_argument("--confidence", type=float, default=0.99,
                   help="of the ratio's interval (default 0.99, as daybreak ab)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="both sides' device (airbench's scripts use cuda)")
    p.add_argument("--threads", type=int, help="torch CPU threads of both sides (default: torch's choice here)")
    p.add_argument("--compile", choices=["off", "default", "reduce-overhead", "max-autotune"],
                   help="torch.compile mode for both sides (default: the script's own: max-autotune for "
                        "airbench94_muon, off for the others)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="a hyperparameter of daybreak's side (a rehearsal on a CPU: epochs=2); recorded and said")
    p.add_argument("--trial-timeout", type=float, default=600.0, help="seconds per fresh process (default 600)")
    p.add_argument("--in-process", action="store_true",
                   help="the old design, labelled so: both sides in this process, daybreak always second, no interval")
    p.add_argument("--side", choices=["airbench"], help="run airbench's side alone in this process: its warm-up "
                                                         "run, then one timed run")
    p.add_argument("--record-loss", action="store_true",
                   help="with --side airbench: record the loss airbench computes at every step (its own dtype and "
                        "float32)")
    p.add_argument("--run-name", default="0", help=argparse.SUPPRESS)
    p.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)  # data already in airbench's format (a child)
    p.add_argument("--result", type=Path, help=argparse.SUPPRESS)  # the child's JSON
    p.add_argument("--out", type=Path, help="write parity.json here")
    p.add_argument("--dry-run", action="store_true", help="check the script and data; train nothing")
    args = p.parse_args(argv)
    if args.pairs < (1 if args.in_process else 2):
        raise ParityError(f"--pairs {args.pairs}: at least {1 if args.in_process else 2} (an interval needs two "
                          "pairs)")
    if not 0.5 <= args.confidence < 1:
        raise ParityError(f"--confidence {args.confidence:g}: must be in [0.5, 1)")
    if args.trial_timeout <= 0 or (args.threads is not None and args.threads < 1):
        raise ParityError("--trial-timeout and --threads must be > 0")
    if args.record_loss and args.side != "airbench":
        raise ParityError("--record-loss goes with --side airbench (recording adds work to the timed steps)")
    args.threads = args.threads or torch.get_num_threads()
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(parse_args(argv))
    except DaybreakError as e:
        print(f"airbench_parity: error: {e}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    if args.workdir is not None:  # a child: the parent wrote the data in airbench's format already
        return _side(args, args.workdir, official=False, torchvision="")
    data = get_task("cifar10").load(args.data_dir, True, False)
    with torchvision_available() as torchvision:
        with tempfile.TemporaryDirectory(prefix="airbench-parity-") as tmp:
            work = Path(tmp)
            write_airbench_data(data, work)
            if args.side:
                return _side(args, work, bool(data.official), torchvision)
            return _compare(args, data, work, torchvision)


def _identify(args: argparse.Namespace, work: Path) -> tuple[types.ModuleType, ScriptKind]:
    module = load_script(args.airbench.expanduser().resolve(), work)
    kind = identify(module, args.airbench)
    if args.recipe is not None and args.recipe != kind.recipe:
        raise ParityError(f"--recipe {args.recipe} does not match {args.airbench.name}, which is {kind.name}: "
                          f"its recipe is {kind.recipe} (leave --recipe out)")
    args.recipe = kind.recipe
    args.compile = args.compile or kind.compile
    return module, kind


def _side(args: argparse.Namespace, work: Path, official: bool, torchvision: str) -> int:
    with torchvision_available() if not torchvision else contextlib.nullcontext(torchvision):
        module, kind = _identify(args, work)
        if args.dry_run:
            print(f"dry run: {args.airbench.name} is {kind.name}; would run its warm-up and one timed run")
            return 0
        got = airbench_side(args, work, kind, module)
    if args.result:
        from daybreak.fileio import atomic_write_text

        atomic_write_text(args.result, json.dumps(got) + "\n")
    if args.workdir is None:
        print(f"airbench {kind.name} on {got['device']} ({got['device_name']}), compile {args.compile}: "
              f"{got['total_s']:.4f} s of training in {len(got['epoch_s'])} epochs, epochs "
              + ", ".join(f"{e:.4f}" for e in got["epoch_s"]))
        if "loss" in got:
            print(describe_loss(got["loss"]))
        if args.out:
            _write(args.out, {**got, "airbench_script": str(args.airbench), "real_data": official})
    return 0


def _write(folder: Path, summary: dict[str, Any]) -> None:
    from daybreak.fileio import atomic_write_text

    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "parity.json", json.dumps(summary, indent=2) + "\n")


def _compare(args: argparse.Namespace, data: Any, work: Path, torchvision: str) -> int:
    module, kind = _identify(args, work)
    if args.dry_run:
        mode = "in-process (both sides in one process, daybreak second)" if args.in_process else \
            f"{args.pairs} pairs of fresh processes, order ABBA"
        print(f"dry run: {args.airbench.name} is {kind.name} (main{inspect.signature(module.main)}); paired "
              f"with daybreak recipe {kind.recipe}, compile {args.compile}; {len(data.train_x)} training and "
              f"{len(data.eval_x)} test images written in airbench's format; {torchvision}; would run {mode}")
        if not args.in_process:
            for pair in range(min(args.pairs, 2)):
                for side in order_of(pair):
                    cmd = airbench_command(args, work, pair, work / "r.json") if side == "airbench" else \
                        daybreak_command(args, work / f"daybreak-{pair}", seed=pair)
                    print(f"  pair {pair + 1} {side}: {shlex.join(cmd)}")
        if args.out:
            _write(args.out, {"dry_run": True, "script_kind": kind.name, "recipe": kind.recipe,
                              "compile": args.compile})
        return 0
    if args.in_process:
        times_a, times_d, acc_a, acc_d = _in_process(args, module, work)
        summary = summarize(times_a, times_d, acc_a, acc_d, official=bool(data.official), confidence=None)
        summary.update(mode="in-process", note="both sides in one process, daybreak always second, one untimed run "
                                               "of each first: not an experiment (no interval)")
    else:
        trials_a, trials_d = experiment(args, work)
        summary = summarize([t.epoch_s for t in trials_a], [t.epoch_s for t in trials_d],
                            [t.accuracy for t in trials_a], [t.accuracy for t in trials_d],
                            official=bool(data.official), confidence=args.confidence)
        warnings = sorted({f"{t.side} pair {t.pair + 1}: {w}" for t in trials_a + trials_d for w in t.warnings})
        summary.update(mode="fresh-processes", order="ABBA", confidence=args.confidence,
                       trials=[t.__dict__ for t in sorted(trials_a + trials_d, key=lambda t: (t.pair, t.position))],
                       device_name=trials_a[0].device_name, threads=trials_a[0].threads, warnings=warnings)
    summary.update(airbench_script=str(args.airbench), script_kind=kind.name, recipe=args.recipe, device=args.device,
                   compile=args.compile, torchvision=torchvision, daybreak_overrides=list(args.set or []),
                   load_avg=list(os.getloadavg()))
    print_summary(summary, args, torchvision)
    if args.out:
        _write(args.out, summary)
    return 0


def _in_process(args: argparse.Namespace, module: types.ModuleType,
                work: Path) -> tuple[list[list[float]], list[list[float]], list, list]:
    """The old design (``--in-process``): both sides in this process, one untimed run of each, then ``--pairs``
    repeats of airbench then daybreak."""
    from daybreak.recipes import get_recipe, parse_overrides
    from daybreak.train.runner import RunConfig, run

    overrides = parse_overrides(args.set, get_recipe(args.recipe).defaults)
    torch.set_num_threads(args.threads)

    def daybreak_train(out: Path, seed: int) -> tuple[list[float], float | None]:
        r = run(RunConfig(task="cifar10", recipe=args.recipe, data_dir=args.data_dir, allow_custom_data=True,
                          download=False, device=args.device, compile=args.compile, full_schedule=True, quiet=True,
                          seed=seed, out=out, threads=args.threads, overrides=overrides))
        _check_run(r, args.recipe)
        return daybreak_epochs(r), r.final_accuracy

    airbench = Airbench(module, work, args.compile, args.device)
    airbench.train("warmup")  # untimed, as airbench's own scripts do before their timed runs
    daybreak_train(work / "daybreak-warmup", seed=0)
    times_a, times_d, acc_a, acc_d = [], [], [], []
    for i in range(args.pairs):
        t0 = time.perf_counter()
        epochs_a, accuracy_a = airbench.train(i)
        epochs_d, accuracy_d = daybreak_train(work / f"daybreak-{i}", seed=i)
        times_a.append(epochs_a)
        times_d.append(epochs_d)
        acc_a.append(accuracy_a)
        acc_d.append(accuracy_d)
        print(f"repeat {i + 1}/{args.pairs}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return times_a, times_d, acc_a, acc_d


if __name__ == "__main__":
    raise SystemExit(main())
