"""A window of training steps under torch.profiler, on daybreak's side or airbench's: device time per step, how much
of the window the device was busy, kernel launches and host synchronizations per step.

    python benchmarks/step_profile.py --side daybreak --recipe cifar10 --data-dir DIR [--skip 20] [--steps 10]
    python benchmarks/step_profile.py --side airbench --airbench legacy/airbench94.py --data-dir DIR

daybreak's side is a real ``daybreak run`` in this process (``--full-schedule`` off: it stops at the target) with
airbench's side is the script's ``main`` after its untimed warm-up run; on both, the end of each step of the first
optimizer that steps marks a step (a global optimizer hook; daybreak's warm-up steps count too: skip them). The profiler skips the first ``--skip`` steps (the
first epoch's start, daybreak's warm-up steps), records ``--steps`` and stops. Printed per step: the wall time
between step marks, the device's kernel time (CUDA kernels' summed durations; on a CPU, none), the device's span
(first kernel start to last kernel end over the window, / steps) and the busy share (kernel time / span: far
below 1 means the host does not keep the device fed), kernel launches, and host synchronizations by kind
(``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, ``aten::_local_scalar_dense``,
which is ``.item()``); the five costliest kernels. Compare the two sides' files: a difference in launches or syncs
per step is work one loop does that the other does not.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import torch

REPO = Path(__file__).resolve().parents[1]
SYNC_EVENTS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "aten::_local_scalar_dense")
LAUNCH_EVENTS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")


class Window:
    """A torch.profiler session that records steps ``skip + 1 .. skip + steps`` of whatever calls ``mark()``."""

    def __init__(self, device: torch.device, skip: int, steps: int):
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        self.steps, self.marks = steps, 0
        self.times: list[float] = []
        # the profiler's step 0 is everything before the first mark, step k the k-th training step: skip 0..skip-1,
        # warm up on step skip (its own first-call costs), record skip+1 .. skip+steps
        self.profiler = profile(activities=activities, schedule=schedule(wait=skip, warmup=1, active=steps, repeat=1),
                                on_trace_ready=self._ready)
        self.events: Any = None
        self.skip = skip

    def _ready(self, prof: Any) -> None:
        self.events = prof.events()

    def mark(self) -> None:
        """A step begins (the previous one ended)."""
        self.marks += 1
        if self.skip < self.marks <= self.skip + self.steps + 1:
            self.times.append(time.perf_counter())
        self.profiler.step()

    def __enter__(self) -> "Window":
        self.profiler.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.profiler.__exit__(*exc)


def figures(window: Window, device: torch.device) -> dict[str, Any]:
    if window.events is None:
        from daybreak.errors import DaybreakError

        raise DaybreakError(f"the run made {window.marks} steps: fewer than --skip {window.skip} + --steps "
                            f"{window.steps} (the window was never recorded)")
    steps = window.steps
    kernels = [e for e in window.events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
    busy_us = sum(e.time_range.end - e.time_range.start for e in kernels)
    span_us = (max(e.time_range.end for e in kernels) - min(e.time_range.start for e in kernels)) if kernels else 0.0
    names = Counter(e.name for e in window.events)
    syncs = {name: names.get(name, 0) / steps for name in SYNC_EVENTS if names.get(name)}
    launches = sum(names.get(name, 0) for name in LAUNCH_EVENTS) / steps
    walls = [b - a for a, b in zip(window.times, window.times[1:])]
    by_kernel: Counter[str] = Counter()
    for e in kernels:
        by_kernel[e.name] += e.time_range.end - e.time_range.start
    return {
        "device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "steps": steps, "skipped": window.skip,
        "wall_ms_per_step": 1e3 * sum(walls) / len(walls) if walls else None,
        "device_ms_per_step": busy_us / 1e3 / steps if kernels else None,
        "device_span_ms_per_step": span_us / 1e3 / steps if kernels else None,
        "device_busy": busy_us / span_us if span_us else None,
        "kernel_launches_per_step": launches, "host_syncs_per_step": syncs,
        "host_syncs_per_step_total": sum(syncs.values()),
        "top_kernels_ms_per_step": {k: v / 1e3 / steps for k, v in by_kernel.most_common(5)},
    }


@contextlib.contextmanager
def steps_marked(window: Window) -> Iterator[None]:
    """Every training step marks the window: after the step of the first optimizer seen (airbench94_muon steps an
    SGD and a Muon optimizer per training step; the first one marks)."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    first: list[torch.optim.Optimizer] = []

    def after_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if not first:
            first.append(optimizer)
        if optimizer is first[0]:
            window.mark()

    handle = register_optimizer_step_post_hook(after_step)
    try:
        yield
    finally:
        handle.remove()


def profile_daybreak(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    from daybreak.recipes import get_recipe, parse_overrides
    from daybreak.train.runner import RunConfig, run

    overrides = parse_overrides(args.set, get_recipe(args.recipe).defaults)
    with tempfile.TemporaryDirectory() as tmp, Window(device, args.skip, args.steps) as window:
        with steps_marked(window):  # daybreak's warm-up restores the optimizer: its steps mark too (--skip them)
            r = run(RunConfig(task="cifar10", recipe=args.recipe, data_dir=args.data_dir, allow_custom_data=True,
                              download=False, device=str(device), compile=args.compile, quiet=True,
                              out=Path(tmp) / "run", overrides=overrides, threads=args.threads))
        window.mark()  # (a run shorter than the window: this closes it)
    out = figures(window, device)
    out.update(side="daybreak", recipe=args.recipe, compile=args.compile, run_status=r.status,
               steps_per_epoch=r.steps_per_epoch)
    return out


def profile_airbench(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    import airbench_parity as ap
    from daybreak.tasks import get_task

    data = get_task("cifar10").load(args.data_dir, True, False)
    with ap.torchvision_available(), tempfile.TemporaryDirectory(prefix="airbench-profile-") as tmp:
        work = Path(tmp)
        ap.write_airbench_data(data, work)
        module = ap.load_script(args.airbench.expanduser().resolve(), work)
        kind = ap.identify(module, args.airbench)
        compile_mode = args.compile or kind.compile
        if args.threads:
            torch.set_num_threads(args.threads)
        airbench = ap.Airbench(module, work, compile_mode, str(device))
        airbench.train("warmup")  # untimed, as its own __main__ does
        with Window(device, args.skip, args.steps) as window:
            with steps_marked(window):
                airbench.train(0)
            window.mark()
    out = figures(window, device)
    out.update(side="airbench", script_kind=kind.name, compile=compile_mode)
    return out


def report(s: dict[str, Any]) -> str:
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f} ms"

    busy = "-" if s["device_busy"] is None else f"{s['device_busy']:.0%}"
    syncs = ", ".join(f"{k} {v:g}" for k, v in s["host_syncs_per_step"].items()) or "none"
    return "\n".join([
        f"{s['side']} ({s.get('recipe') or s.get('script_kind')}, compile {s['compile']}) on {s['device']} "
        f"({s['device_name']}): steps {s['skipped'] + 1}-{s['skipped'] + s['steps']}",
        f"  per step: wall {ms(s['wall_ms_per_step'])}, device kernels {ms(s['device_ms_per_step'])} over a span of "
        f"{ms(s['device_span_ms_per_step'])} (busy {busy}), {s['kernel_launches_per_step']:g} kernel launches",
        f"  host synchronizations per step: {syncs}",
    ] + [f"  {v:.3f} ms  {k[:100]}" for k, v in s["top_kernels_ms_per_step"].items()])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/step_profile.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--side", choices=["daybreak", "airbench"], required=True)
    p.add_argument("--data-dir", type=Path, required=True, help="CIFAR-10 python distribution (real or synthetic)")
    p.add_argument("--recipe", default="cifar10", help="daybreak's side: the recipe (default cifar10)")
    p.add_argument("--airbench", type=Path, help="airbench's side: the path of your airbench script")
    p.add_argument("--device", default="auto", help="auto (CUDA when visible), cpu, cuda, ...")
    p.add_argument("--compile", choices=["off", "default", "reduce-overhead", "max-autotune"],
                   help="torch.compile mode (daybreak: default off; airbench: its script's own)")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="daybreak's side: a hyperparameter")
    p.add_argument("--skip", type=int, default=20, help="steps before the window (default 20)")
    p.add_argument("--steps", type=int, default=10, help="steps in the window (default 10)")
    p.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = p.parse_args(argv)
    from daybreak.errors import DaybreakError
    from daybreak.measure.device import select_device

    try:
        if args.skip < 0 or args.steps < 1:
            raise DaybreakError("--skip must be >= 0 and --steps >= 1")
        if args.side == "airbench" and args.airbench is None:
            raise DaybreakError("--side airbench needs --airbench PATH (your airbench script)")
        device = select_device(args.device)
        if args.side == "daybreak":
            args.compile = args.compile or "off"
            s = profile_daybreak(args, device)
        else:
            s = profile_airbench(args, device)
    except DaybreakError as e:
        print(f"step_profile: error: {e}", file=sys.stderr)
        return 2
    print(report(s))
    if args.out:
        from daybreak.fileio import atomic_write_json

        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.out, s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
