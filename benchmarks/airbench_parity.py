"""airbench parity: airbench's own training loop and daybreak's matching recipe, interleaved on the same device.

    python benchmarks/airbench_parity.py --airbench ~/src/cifar10-airbench/legacy/airbench94.py --data-dir DIR
    python benchmarks/airbench_parity.py --airbench airbench94_muon.py --data-dir DIR --repeats 5

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

What runs: the script is imported (its ``if __name__ == "__main__"`` block does not run) and its ``main(run)`` (or
``main(run, model)`` with ``CifarNet()`` compiled as its own ``__main__`` does, for airbench94_muon) is called once
untimed (airbench's ``"warmup"`` run) and then ``--repeats`` times, alternating with a daybreak run of ``--recipe``
on the same data (``--full-schedule``, so both train their whole schedule; one untimed daybreak run first as well).
airbench's time per epoch is the difference of its own cumulative ``..._time_seconds`` column (CUDA events around
each epoch's training; its first epoch includes its whitening); daybreak's is the ``train`` phase of each epoch in
its record (the first includes preparing the data and the whitening). Printed: each epoch's median time on both
sides and their ratio, the ratio of the total training time (goal, issue 21: <= 1.05) and, on real CIFAR-10 (the
official checksums), both final accuracies (airbench's returned TTA accuracy, daybreak's last evaluation).
``--out DIR`` writes ``parity.json``. ``--dry-run`` checks everything without training: the data converts, the
script imports and has ``main``.

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
import os
import statistics
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
from daybreak.train.runner import RunConfig, run

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


def daybreak_train(args: argparse.Namespace, out: Path, seed: int) -> tuple[list[float], float | None]:
    r = run(RunConfig(task="cifar10", recipe=args.recipe, data_dir=args.data_dir, allow_custom_data=True,
                      download=False, device=args.device, compile=args.compile, full_schedule=True, quiet=True,
                      seed=seed, out=out))
    if r.status in ("failed", "diverged", "interrupted"):  # no epochs to compare (an H200 run met "diverged")
        raise ParityError(f"daybreak's {args.recipe} run {r.status}: {r.message} (no ratio to report)")
    return daybreak_epochs(r), r.final_accuracy


def summarize(airbench: list[list[float]], daybreak: list[list[float]], acc_a: list, acc_d: list,
              official: bool) -> dict[str, Any]:
    epochs = min(min(len(e) for e in airbench), min(len(e) for e in daybreak))
    rows = []
    for i in range(epochs):
        a = statistics.median(e[i] for e in airbench)
        d = statistics.median(e[i] for e in daybreak)
        rows.append({"epoch": i + 1, "airbench_s": a, "daybreak_s": d, "ratio": d / a if a > 0 else None})
    totals = [sum(d[:epochs]) / sum(a[:epochs]) for a, d in zip(airbench, daybreak) if sum(a[:epochs]) > 0]
    out: dict[str, Any] = {"epochs": rows, "repeats": len(totals),
                           "ratio_total": statistics.median(totals) if totals else None, "goal_ratio": GOAL_RATIO,
                           "real_data": official}
    if official:
        out["airbench_accuracy"] = statistics.mean(a for a in acc_a if a is not None) if any(acc_a) else None
        out["daybreak_accuracy"] = statistics.mean(a for a in acc_d if a is not None) if any(acc_d) else None
    return out


def print_summary(s: dict[str, Any], args: argparse.Namespace, torchvision: str) -> None:
    print(f"airbench parity on {args.device}: {args.airbench.name} ({s['script_kind']}) vs daybreak {args.recipe} "
          f"(compile {args.compile}), {s['repeats']} interleaved repeat(s); {torchvision}")
    print(f"{'epoch':>5} {'airbench s':>11} {'daybreak s':>11} {'ratio':>7}")
    for row in s["epochs"]:
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.3f}"
        print(f"{row['epoch']:>5} {row['airbench_s']:>11.4f} {row['daybreak_s']:>11.4f} {ratio:>7}")
    if s["ratio_total"] is not None:
        verdict = "within" if s["ratio_total"] <= GOAL_RATIO else "ABOVE"
        print(f"training time ratio daybreak / airbench: {s['ratio_total']:.3f}x ({verdict} the {GOAL_RATIO}x goal)")
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
    p.add_argument("--repeats", type=int, default=3, help="interleaved timed runs of each (default 3)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="daybreak's device (airbench's scripts use cuda)")
    p.add_argument("--compile", choices=["off", "default", "reduce-overhead", "max-autotune"],
                   help="torch.compile mode for both sides (default: the script's own: max-autotune for "
                        "airbench94_muon, off for the others)")
    p.add_argument("--out", type=Path, help="write parity.json here")
    p.add_argument("--dry-run", action="store_true", help="check the script and data; train nothing")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return _main(args)
    except DaybreakError as e:
        print(f"airbench_parity: error: {e}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    data = get_task("cifar10").load(args.data_dir, True, False)
    with torchvision_available() as torchvision:
        return _compare(args, data, torchvision)


def _compare(args: argparse.Namespace, data: Any, torchvision: str) -> int:
    with tempfile.TemporaryDirectory(prefix="airbench-parity-") as tmp:
        work = Path(tmp)
        write_airbench_data(data, work)
        module = load_script(args.airbench.expanduser().resolve(), work)
        kind = identify(module, args.airbench)
        if args.recipe is not None and args.recipe != kind.recipe:
            raise ParityError(f"--recipe {args.recipe} does not match {args.airbench.name}, which is {kind.name}: "
                              f"its recipe is {kind.recipe} (leave --recipe out)")
        args.recipe = kind.recipe
        args.compile = args.compile or kind.compile
        if args.dry_run:
            print(f"dry run: {args.airbench.name} is {kind.name} (main{inspect.signature(module.main)}); paired "
                  f"with daybreak recipe {kind.recipe}, compile {args.compile}; {len(data.train_x)} training and "
                  f"{len(data.eval_x)} test images written in airbench's format; {torchvision}; would run "
                  f"{args.repeats} interleaved repeat(s)")
            if args.out:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / "parity.json").write_text(json.dumps(
                    {"dry_run": True, "script_kind": kind.name, "recipe": kind.recipe, "compile": args.compile},
                    indent=2) + "\n")
            return 0
        airbench = Airbench(module, work, args.compile, args.device)
        airbench.train("warmup")  # untimed, as airbench's own scripts do before their timed runs
        daybreak_train(args, work / "daybreak-warmup", seed=0)
        times_a, times_d, acc_a, acc_d = [], [], [], []
        for i in range(args.repeats):  # interleaved: drift on the machine hits both alike
            t0 = time.perf_counter()
            epochs_a, accuracy_a = airbench.train(i)
            epochs_d, accuracy_d = daybreak_train(args, work / f"daybreak-{i}", seed=i)
            times_a.append(epochs_a)
            times_d.append(epochs_d)
            acc_a.append(accuracy_a)
            acc_d.append(accuracy_d)
            print(f"repeat {i + 1}/{args.repeats}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    summary = summarize(times_a, times_d, acc_a, acc_d, official=bool(data.official))
    summary.update(airbench_script=str(args.airbench), script_kind=kind.name, recipe=args.recipe, device=args.device,
                   compile=args.compile, torchvision=torchvision, airbench_epoch_s=times_a, daybreak_epoch_s=times_d)
    print_summary(summary, args, torchvision)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "parity.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
