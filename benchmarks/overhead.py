"""Overhead of `daybreak run` vs a bare PyTorch loop doing the same recipe on the same data.

Both sides: same data load, recipe build, seed (so the same data order and the same epoch of first reaching
the target), same prepare/augment/schedule. The bare loop keeps two clocks with perf_counter_ns, both started
just before loading the data: DAWNBench v1's (data loading, model build and training; evaluations excluded) and
MLPerf's (never paused: evaluations included) up to the end of the evaluation that reaches the target; daybreak's
figures are its record's ``clocks``. Runs are interleaved (bare, daybreak, bare, ...) so drift on a shared machine
hits both alike; the ratio of medians is printed for each rule set.

    python benchmarks/overhead.py [--task digits] [--repeats 9] [--target 0.98]

Claim (issues 2 and 12): time-to-target ratio daybreak / bare <= 1.02 under both rule sets.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from daybreak.recipes import get_recipe
from daybreak.tasks import get_task
from daybreak.tasks.evaluate import evaluate
from daybreak.train.runner import RunConfig, run, seed_everything


def bare_time_to_target(task_name: str, seed: int, target: float) -> dict[str, float]:
    """The plainest loop that does what the recipe says; returns seconds to target under each rule set."""
    task = get_task(task_name)
    recipe = get_recipe(get_task(task_name).reference_recipe)
    hp = recipe.hyperparameters()
    seed_everything(seed)
    t_start = time.perf_counter_ns()  # both clocks start at the first touch of the data
    data = task.load(None, False, False)
    device = torch.device("cpu")
    setup = recipe.build(hp, data, device)
    bs = min(hp["batch_size"], len(data.train_x))
    steps_per_epoch = max(len(data.train_x) // bs, 1)
    total = steps_per_epoch * hp["epochs"]
    order = torch.Generator().manual_seed(seed)
    aug = torch.Generator().manual_seed(seed + 1)
    base = [g["lr"] for g in setup.optimizer.param_groups]
    step, eval_ns = 0, 0
    train_x = setup.prepare(data.train_x)
    if setup.init_from_data:
        setup.init_from_data(train_x, data.train_y)
    eval_x = None
    setup.model.train()
    for _ in range(hp["epochs"]):
        perm = torch.randperm(len(train_x), generator=order)
        for i in range(steps_per_epoch):
            idx = perm[i * bs:(i + 1) * bs]
            x, y = train_x[idx], data.train_y[idx]
            if setup.augment:
                x = setup.augment(x, aug)
            for g, b in zip(setup.optimizer.param_groups, base):
                g["lr"] = b * setup.lr_multiplier(step, total)
            loss = setup.loss_fn(setup.model(x), y)
            setup.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            setup.optimizer.step()
            step += 1
        e0 = time.perf_counter_ns()
        if eval_x is None:
            eval_x = setup.prepare(data.eval_x)
        top1, _ = evaluate(setup.model, eval_x, data.eval_y, device=device, predict=setup.predict)
        e1 = time.perf_counter_ns()
        eval_ns += e1 - e0
        if top1 >= target:
            return {"mlperf": (e1 - t_start) / 1e9, "dawnbench": (e1 - t_start - eval_ns) / 1e9}
    raise SystemExit("bare loop did not reach the target; pick a lower --target")


def daybreak_time_to_target(task_name: str, seed: int, target: float, out: Path) -> dict[str, float]:
    r = run(RunConfig(task=task_name, seed=seed, target=target, out=out, quiet=True, device="cpu"))
    if not r.reached:
        raise SystemExit("daybreak run did not reach the target; pick a lower --target")
    return {name: fig.time_to_target_s for name, fig in r.clocks.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="digits")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--target", type=float, default=None, help="fraction; default: the task's")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (1 is steadier on a busy machine)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = args.target or get_task(args.task).target
    bare: list[dict[str, float]] = []
    ours: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        bare_time_to_target(args.task, args.seed, target)  # warm-up: imports, allocator, caches
        daybreak_time_to_target(args.task, args.seed, target, Path(tmp) / "warm")
        for i in range(args.repeats):
            bare.append(bare_time_to_target(args.task, args.seed, target))
            ours.append(daybreak_time_to_target(args.task, args.seed, target, Path(tmp) / f"run{i}"))
            print(f"  repeat {i + 1}/{args.repeats}: bare {bare[-1]}  daybreak {ours[-1]}", file=sys.stderr)
    print(f"task {args.task}, target {target:.4f}, {args.repeats} interleaved repeats, torch threads {torch.get_num_threads()}")
    for rules in ("dawnbench", "mlperf"):
        b = [x[rules] for x in bare]
        o = [x[rules] for x in ours]
        mb, mo = statistics.median(b), statistics.median(o)
        print(f"[{rules}] bare loop median {mb:.4f} s (min {min(b):.4f}, max {max(b):.4f}); "
              f"daybreak median {mo:.4f} s (min {min(o):.4f}, max {max(o):.4f})")
        ratio = mo / mb
        print(f"[{rules}] ratio of medians daybreak/bare = {ratio:.4f}  (claim: <= 1.02) -> "
              f"{'OK' if ratio <= 1.02 else 'ABOVE CLAIM'}; ratio of minimums {min(o) / min(b):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
