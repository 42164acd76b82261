"""daybreak against mlperf-logging on published MLPerf Training results: per-run times and verdicts, per-folder scores.

For each results repository given (a checkout, or the bare git directory of one, of
github.com/mlcommons/training_results_v<round>; the round comes from its name), a seeded sample of --per-benchmark
result logs of every benchmark, plus every log of the round whose run_stop status is not success, is read twice:

- by `daybreak time --log FILE --rules mlperf` (in process, `daybreak.external.timer.time_log`, no --task, no
  --round: the benchmark from the log's submission_benchmark, the round from the path);
- by mlperf-logging's result summarizer, the way it scores a run (``_read_result_file``: the round's compliance
  check, then ``_query_run_start_stop``): converged or not, and run_stop - run_start.

A log agrees when both call it reached/converged alike and, where both reached, their times differ by at most 1 ms.
With --scores SUBMITTER,... (default: six v5.0 submitters) the round whose name is --scores-round has those
submitters' folders imported by `daybreak leaderboard import-mlperf` into a scratch database, each entry's score
compared with the summarizer's ``_compute_strong_score_standalone`` of the same folder.

Published logs are copied into a temporary folder only while they are read, and never kept.

    python benchmarks/mlperf_agreement.py /work/.mirror/mlcommons+training_results_v4.0/repo ... \\
        [--per-benchmark 10] [--seed 28] [--scores tinycorp,ASUSTeK,GigaComputing,AMD,krai,Lambda] [--markdown]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from daybreak.mlperf_benchmarks import ROUND_FOLDER, normalize_round, ruleset

RESULT = re.compile(r"^([^/]+)/results/([^/]+)/([^/]+)/(result_[^/]*\.txt)$")
NOT_SUCCESS = r'"key": "run_stop".*"status": "[^s]'
DEFAULT_SCORES = "tinycorp,ASUSTeK,GigaComputing,AMD,krai,Lambda"


class Repo:
    """A results repository: a working tree, or a bare git directory read with `git show`."""

    def __init__(self, path: Path):
        self.path = path
        self.bare = not (path / "results").exists() and (path / "HEAD").is_file() and (path / "objects").is_dir()
        m = ROUND_FOLDER.search(str(path.resolve()))
        if not m:
            raise SystemExit(f"{path}: the path names no training_results_v<round>")
        self.round = normalize_round(m.group(1))

    def git(self, *args: str, binary: bool = False):
        out = subprocess.run(["git", f"--git-dir={self.path}", *args], capture_output=True, check=False)
        return out.stdout if binary else out.stdout.decode("utf-8", "replace")

    def files(self) -> list[str]:
        if self.bare:
            return [f for f in self.git("ls-tree", "-r", "--name-only", "HEAD").splitlines() if RESULT.match(f)]
        return sorted(str(p.relative_to(self.path)) for p in self.path.glob("*/results/*/*/result_*.txt"))

    def not_success(self) -> set[str]:
        if self.bare:
            out = self.git("grep", "-l", "-E", NOT_SUCCESS, "HEAD", "--", "*/results/*/*/result_*.txt")
            return {line.removeprefix("HEAD:") for line in out.splitlines()}
        return {f for f in self.files() if re.search(NOT_SUCCESS, (self.path / f).read_text(errors="replace"))}

    def read(self, name: str) -> bytes | None:
        if self.bare:
            data = self.git("show", f"HEAD:{name}", binary=True)
            return data or None  # a blob the snapshot lacks reads as nothing
        return (self.path / name).read_bytes()


def summarizer_run(path: Path, rules: str) -> tuple[bool, float | None]:
    """mlperf-logging's result summarizer on one run: (converged, run_stop - run_start in seconds)."""
    from mlperf_logging.result_summarizer import result_summarizer as rs

    with contextlib.redirect_stdout(io.StringIO()):
        try:
            lines = rs._read_result_file(str(path), "training", rules)
            start, stop = rs._query_run_start_stop(lines)
        except ValueError:
            return False, None
    return True, (stop - start) / 1000.0


def daybreak_run(path: Path, out: Path) -> tuple[bool, float | None, str]:
    """`daybreak time --log FILE --rules mlperf` on one run: (reached, time to target in seconds, benchmark)."""
    from daybreak.errors import DaybreakError
    from daybreak.external.config import TimeConfig
    from daybreak.external.timer import time_log

    try:
        result = time_log(TimeConfig(task=None, log=path, rules="mlperf", out=out, quiet=True,
                                     invocation=["daybreak", "time", "--rules", "mlperf", "--log", str(path)]))
    except DaybreakError as e:
        return False, None, f"error: {e}"
    return result.status == "reached", result.time_to_target_s, result.task


def sample(repo: Repo, per_benchmark: int, seed: int) -> dict[str, list[str]]:
    by_benchmark: dict[str, list[str]] = defaultdict(list)
    for f in repo.files():
        by_benchmark[RESULT.match(f).group(3)].append(f)
    bad = repo.not_success()
    out = {}
    for bench, files in sorted(by_benchmark.items()):
        rng = random.Random(f"{seed}/{repo.round}/{bench}")
        chosen = rng.sample(sorted(files), min(per_benchmark, len(files)))
        chosen += sorted(f for f in files if f in bad and f not in chosen)
        out[bench] = chosen
    return out


def compare_runs(repo: Repo, per_benchmark: int, seed: int, tmp: Path) -> list[dict]:
    rows = []
    rules = ruleset(repo.round)
    for bench, files in sample(repo, per_benchmark, seed).items():
        for i, name in enumerate(files):
            data = repo.read(name)
            if data is None:
                rows.append({"round": repo.round, "benchmark": bench, "file": name, "readable": False})
                continue
            # the path keeps the round's folder name: daybreak takes the round from it, as from a checkout
            local = tmp / f"training_results_{repo.round}" / name
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(data)
            converged, s_time = summarizer_run(local, rules)
            out = tmp / "out" / f"{repo.round}-{bench}-{i}"
            reached, d_time, task = daybreak_run(local, out)
            shutil.rmtree(out, ignore_errors=True)  # its mllog.log is a copy of the published log
            status = re.search(rb'"key": "run_stop".*?"status": "(\w+)"', data)
            diff = abs(d_time - s_time) if reached and converged and d_time is not None else None
            rows.append({"round": repo.round, "benchmark": bench, "file": name, "readable": True,
                         "status": status.group(1).decode() if status else None, "summarizer": converged,
                         "summarizer_s": s_time, "daybreak": reached, "daybreak_s": d_time, "task": task,
                         "agrees": reached == converged and (diff is None or diff <= 0.001), "diff_s": diff})
            local.unlink()
    return rows


def compare_scores(repo: Repo, submitters: list[str], tmp: Path) -> list[dict]:
    """import-mlperf's score of every benchmark folder of ``submitters`` against the summarizer's."""
    from mlperf_logging.result_summarizer import result_summarizer as rs

    from daybreak.leaderboard.mlperf_import import import_mlperf
    from daybreak.leaderboard.store.database import Store

    root = tmp / "scores" / f"training_results_{repo.round}"
    wanted = [f for f in repo.git("ls-tree", "-r", "--name-only", "HEAD").splitlines()
              if f.split("/")[0] in submitters and (RESULT.match(f) or re.match(r"^[^/]+/systems/[^/]+\.json$", f)
                                                    or f.endswith("/scaling.json"))] if repo.bare else []
    for f in wanted:
        data = repo.read(f)
        if data is not None:
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).write_bytes(data)
    rows = []
    with Store(f"sqlite:///{tmp / 'scores.sqlite'}") as store:
        import_mlperf(store, root)
        entries = {e.source.split("/results/")[1]: e for e in store.entries() if e.source_format == "mlperf-training"}
        for folder in sorted(root.glob("*/results/*/*")):
            system, bench = folder.parent.name, folder.name
            with contextlib.redirect_stdout(io.StringIO()):
                minutes, _, _ = rs._compute_strong_score_standalone(bench, system, False, str(folder), "training",
                                                                     ruleset(repo.round))
            entry = entries.get(f"{system}/{bench}")
            ours = entry.time_to_target_s if entry is not None else None
            theirs = minutes * 60.0 if minutes is not None else None
            agrees = (ours is None and theirs is None) or (
                ours is not None and theirs is not None and abs(ours - theirs) <= 0.001)
            rcp = (entry.document.get("rcp") if entry is not None else None) or {}
            rows.append({"submitter": folder.parent.parent.parent.name, "system": system, "benchmark": bench,
                         "daybreak_min": None if ours is None else ours / 60, "summarizer_min": minutes,
                         "agrees": agrees, "rcp": "" if not rcp else
                         f"{'pass' if rcp['passed'] else 'FAIL'} ({rcp['message']}), x{rcp['normalization']:.4f}"})
    return rows


def table(rows: list[dict]) -> str:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["benchmark"], r["round"])].append(r)
    lines = ["| benchmark | round | logs sampled | not success | agreeing | worst abs(diff) | unreadable |",
             "|---|---|---|---|---|---|---|"]
    for (bench, round_), rs in sorted(groups.items()):
        read = [r for r in rs if r["readable"]]
        diffs = [r["diff_s"] for r in read if r["diff_s"] is not None]
        worst = f"{max(diffs) * 1000:.3f} ms" if diffs else "-"
        lines.append(f"| {bench} | {round_} | {len(read)} | {sum(1 for r in read if r['status'] != 'success')} | "
                     f"{sum(1 for r in read if r['agrees'])} ({100 * sum(1 for r in read if r['agrees']) / max(len(read), 1):.0f}%) "
                     f"| {worst} | {len(rs) - len(read)} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repos", nargs="+", type=Path, help="training_results_v<round> checkouts or bare git directories")
    ap.add_argument("--per-benchmark", type=int, default=10, help="logs sampled per benchmark per round (default 10)")
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--scores", default=DEFAULT_SCORES, help="submitters whose folders' scores are compared")
    ap.add_argument("--scores-round", default="v5.0")
    ap.add_argument("--markdown", action="store_true", help="print only the README's tables")
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # the summarizer's checker logs each check
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the scratch copies of published logs go on the way out
    start = time.perf_counter()
    rows, scores = [], []
    with tempfile.TemporaryDirectory(prefix="daybreak-mlperf-agreement-") as tmp:
        for path in args.repos:
            repo = Repo(path)
            got = compare_runs(repo, args.per_benchmark, args.seed, Path(tmp))
            rows += got
            if not args.markdown:
                for r in got:
                    if r["readable"] and not r["agrees"]:
                        print(f"DISAGREE {r['round']} {r['file']}: daybreak {r['daybreak']} {r['daybreak_s']} "
                              f"({r['task']}), summarizer {r['summarizer']} {r['summarizer_s']}", file=sys.stderr)
            if repo.round == normalize_round(args.scores_round) and args.scores:
                scores = compare_scores(repo, args.scores.split(","), Path(tmp))
    print(table(rows))
    if scores:
        print()
        print(f"import-mlperf scores vs the summarizer's, {args.scores_round}, {len(scores)} system x benchmark "
              f"folders of {args.scores}: {sum(s['agrees'] for s in scores)} agree")
        print()
        print("| submitter | system | benchmark | daybreak (min) | summarizer (min) | agrees | RCP |")
        print("|---|---|---|---|---|---|---|")
        for s in scores:
            d = "-" if s["daybreak_min"] is None else f"{s['daybreak_min']:.3f}"
            m = "-" if s["summarizer_min"] is None else f"{s['summarizer_min']:.3f}"
            print(f"| {s['submitter']} | {s['system']} | {s['benchmark']} | {d} | {m} | "
                  f"{'yes' if s['agrees'] else 'NO'} | {s['rcp']} |")
    if not args.markdown:
        total = [r for r in rows if r["readable"]]
        print(f"\n{sum(r['agrees'] for r in total)} of {len(total)} logs agree; "
              f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0 if all(r["agrees"] for r in rows if r["readable"]) and all(s["agrees"] for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
