"""Human-readable summary of a RunResult (printed at the end of `daybreak run` and by `daybreak show`)."""

from __future__ import annotations

from daybreak.records.run import RunResult


def hms(seconds: float | None) -> str:
    """DAWNBench-style h:mm:ss with milliseconds for short runs."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    h, rem = divmod(whole, 3600)
    m, s = divmod(rem, 60)
    frac = seconds - whole
    return f"{h}:{m:02d}:{s:02d}" + (f".{int(frac * 1000):03d}" if seconds < 60 else "")


def pct(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction * 100:.2f}%"


def format_summary(r: RunResult, run_dir: str | None = None) -> str:
    verdict = {
        "reached": "REACHED the target",
        "not_reached": "did NOT reach the target",
        "diverged": "DIVERGED",
        "failed": "FAILED",
        "interrupted": "was INTERRUPTED",
        "running": "is still running (or was killed)",
    }[r.status]
    lines = [
        f"daybreak run {r.run_id}: {r.task} / {r.recipe} {verdict}",
        f"  target           {pct(r.target)} {r.metric}" + ("" if r.official else "   (unofficial: " + "; ".join(r.unofficial_reasons) + ")"),
        f"  time to target   {hms(r.time_to_target_s)}" + (f"  ({r.time_to_target_s:.3f} s)" if r.time_to_target_s is not None else ""),
        f"  epochs to target {r.epochs_to_target:g}" if r.epochs_to_target is not None else "  epochs to target -",
        "  cost to target   " + (f"${r.cost_usd:.4f} at ${r.cost_per_hour:.3f}/h" + (f" ({r.instance}, price of {r.price_date})" if r.instance else "")
                                  if r.cost_usd is not None else "- (pass --cost-per-hour or --instance)"),
        f"  accuracy         final {pct(r.final_accuracy)}, best {pct(r.best_accuracy)}",
        f"  clock            init {r.init_s or 0:.2f} s (excluded), eval {r.eval_s:.2f} s ({'included' if r.clock.eval_included else 'excluded'}), "
        f"train {r.train_s:.2f} s, total {r.total_s or 0:.2f} s",
        f"  setup            device {r.device}, amp {r.amp}, compile {'on' if r.compile else 'off'}, threads {r.threads}, seed {r.seed}, "
        f"batch {r.global_batch_size}",
        f"  system           {r.system.hardware_summary()}; torch {r.system.torch}, python {r.system.python}",
    ]
    if r.message:
        lines.append(f"  note             {r.message}")
    if run_dir:
        lines.append(f"  run directory    {run_dir}")
    return "\n".join(lines)
