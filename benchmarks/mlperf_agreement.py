"""daybreak against mlperf-logging on published MLPerf Training results: per-run times and verdicts, per-folder scores.

For each results repository given (a checkout, or the bare git directory of one, of
github.com/mlcommons/training_results_v<round>, or a folder of some of its files laid out as in it; the round comes
from its name), or found for every round of daybreak.mlperf_benchmarks.ROUNDS under --mirror, a seeded sample of
result logs of every benchmark is read twice:

- by `daybreak time --log FILE --rules mlperf` (in process, `daybreak.external.timer.time_log`, no --task, no
  --round: the benchmark from the log's submission_benchmark, the round from the path);
- by mlperf-logging's result summarizer, the way it scores a run (``_read_result_file``: the round's compliance
  check, then ``_query_run_start_stop``): converged or not, and run_stop - run_start. A log its checker stops on
  (an exception) is one the summarizer cannot score: not converged.

The sample of each (round, benchmark): --per-benchmark logs taken in turn from each submitter (a seeded order of
submitters, a seeded log of each), so every submitter of a benchmark is in it before any has two; and, beside them,
up to --aborted logs whose run_stop status is not success, likewise spread over submitters.

A log agrees when both call it reached/converged alike and, where both reached, their times differ by at most 1 ms.
daybreak's verdict takes the checks that concern time and quality (run_stop's status, the initialization limit, the
target; `daybreak check-mllog` runs the whole checker): a log that the summarizer drops only for other compliance
checks of today's mlperf-logging (a hyperparameter, weight-initialization records that older rounds' logs lack) is
counted apart, "failing other checks only", and agrees on time and quality when daybreak reads it reached with the
summarizer's own run_stop - run_start. Each such check is listed.
With --scores ROUND:SUBMITTER[/BENCHMARK],... those submitters' folders of that round are imported by `daybreak
leaderboard import-mlperf` into a scratch database, each entry's score compared with the summarizer's
``_compute_strong_score_standalone`` of the same folder (and its framework shown, as chosen for a systems JSON that
lists several).

Published logs are copied into a temporary folder only while they are read, and never kept.

    python benchmarks/mlperf_agreement.py --mirror /work/.mirror [REPO ...] [--per-benchmark 8] [--aborted 4] \\
        [--seed 39] [--scores v5.0:tinycorp,v3.1:NVIDIA/stable_diffusion,...] [--markdown]
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

from daybreak.mlperf_benchmarks import ROUND_FOLDER, ROUNDS, normalize_round, ruleset

RESULT = re.compile(r"^([^/]+)/results/([^/]+)/([^/]+)/(result_[^/]*\.txt)$")
NOT_SUCCESS = r'"key": "run_stop".*"status": "[^s]'
DEFAULT_SCORES = ("v5.0:tinycorp,v5.0:ASUSTeK,v5.0:GigaComputing,v5.0:AMD,v5.0:krai,v5.0:Lambda,"
                  "v3.1:NVIDIA/stable_diffusion,v3.1:Dell/stable_diffusion,v3.1:Intel-HabanaLabs/stable_diffusion")


class Repo:
    """A results repository: a working tree (or a folder of some of its files), or a bare git directory read with
    `git show`."""

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

    def names(self) -> list[str]:
        if self.bare:
            return self.git("ls-tree", "-r", "--name-only", "HEAD").splitlines()
        return sorted(str(p.relative_to(self.path)) for p in self.path.rglob("*") if p.is_file())

    def files(self) -> list[str]:
        return [f for f in self.names() if RESULT.match(f)]

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


def find_rounds(mirror: Path) -> dict[str, Path]:
    """Every round of the table with a repository under ``mirror`` (fetch's owner+name/repo folders, or plain
    training_results_v<round> folders)."""
    found: dict[str, Path] = {}
    for path in sorted(mirror.iterdir()):
        m = ROUND_FOLDER.search(path.name)
        if not m or normalize_round(m.group(1)) not in ROUNDS:
            continue
        repo = path / "repo" if (path / "repo").is_dir() else path
        found.setdefault(normalize_round(m.group(1)) or "", repo)
    return found


# a compliance message about these keys concerns time (the clock's ends, the initialization) or quality (the target);
# any other is a check daybreak's verdict does not take (hyperparameters, weight initialization, required keys)
TIME_AND_QUALITY = ("eval_accuracy", "run_start", "run_stop", "init_start", "init_stop", "parsing errors",
                    "No log lines")


def summarizer_run(path: Path, rules: str) -> tuple[bool, float | None, str, list[str]]:
    """mlperf-logging's result summarizer on one run: (converged, run_stop - run_start in seconds, why not, the
    compliance checker's messages that concern neither time nor quality when those alone failed the log; the time
    is then the summarizer's own reading of the parsed log, as it would be without them)."""
    from mlperf_logging.compliance_checker import mlp_parser
    from mlperf_logging.result_summarizer import result_summarizer as rs

    from daybreak.external.compliance import run_checker

    with contextlib.redirect_stdout(io.StringIO()):
        try:
            lines = rs._read_result_file(str(path), "training", rules)
            start, stop = rs._query_run_start_stop(lines)
        except ValueError as e:
            if str(e) != "Compliance check failed":
                return False, None, str(e), []
            messages = run_checker(path, f"training_{rules}/common.yaml", rules)
            others = [m for m in messages if not any(k in m for k in TIME_AND_QUALITY)]
            if not messages or len(others) < len(messages):
                return False, None, "; ".join(m[:120] for m in messages), []
            try:
                start, stop = rs._query_run_start_stop(mlp_parser.parse_file(str(path), ruleset=rules)[0])
            except ValueError as e2:
                return False, None, str(e2), []
            return False, (stop - start) / 1000.0, "compliance: other checks", [m[:120] for m in others]
        except Exception as e:  # noqa: BLE001 - its checker stops on the log: the summarizer cannot score it
            return False, None, f"the checker stops on it ({type(e).__name__}: {e})", []
    return True, (stop - start) / 1000.0, "", []


def daybreak_run(path: Path, out: Path) -> tuple[bool, float | None, str]:
    """`daybreak time --log FILE --rules mlperf` on one run: (reached, time to target in seconds, benchmark or why)."""
    from daybreak.errors import DaybreakError
    from daybreak.external.config import TimeConfig
    from daybreak.external.timer import time_log

    try:
        result = time_log(TimeConfig(task=None, log=path, rules="mlperf", out=out, quiet=True,
                                     invocation=["daybreak", "time", "--rules", "mlperf", "--log", str(path)]))
    except DaybreakError as e:
        return False, None, f"error: {e}"
    return result.status == "reached", result.time_to_target_s, result.task if result.status == "reached" else \
        f"{result.task}: {result.message}"


def spread(files: list[str], n: int, rng: random.Random) -> list[str]:
    """Up to ``n`` of ``files``, taken in turn from each submitter (a seeded order of submitters, of their logs)."""
    by_submitter: dict[str, list[str]] = defaultdict(list)
    for f in sorted(files):
        by_submitter[f.split("/")[0]].append(f)
    order = sorted(by_submitter)
    rng.shuffle(order)
    for name in order:
        rng.shuffle(by_submitter[name])
    chosen: list[str] = []
    while len(chosen) < n and any(by_submitter.values()):
        for name in order:
            if by_submitter[name] and len(chosen) < n:
                chosen.append(by_submitter[name].pop())
    return chosen


def sample(repo: Repo, per_benchmark: int, aborted: int, seed: int) -> dict[str, list[str]]:
    by_benchmark: dict[str, list[str]] = defaultdict(list)
    for f in repo.files():
        by_benchmark[RESULT.match(f).group(3)].append(f)
    bad = repo.not_success()
    out = {}
    for bench, files in sorted(by_benchmark.items()):
        rng = random.Random(f"{seed}/{repo.round}/{bench}")
        chosen = spread([f for f in files if f not in bad], per_benchmark, rng)
        chosen += spread([f for f in files if f in bad], aborted, rng)
        out[bench] = chosen
    return out


def compare_runs(repo: Repo, per_benchmark: int, aborted: int, seed: int, tmp: Path) -> list[dict]:
    rows = []
    rules = ruleset(repo.round)
    for bench, files in sample(repo, per_benchmark, aborted, seed).items():
        for i, name in enumerate(files):
            data = repo.read(name)
            row = {"round": repo.round, "benchmark": bench, "file": name, "submitter": name.split("/")[0]}
            if data is None:
                rows.append({**row, "readable": False})
                continue
            # the path keeps the round's folder name: daybreak takes the round from it, as from a checkout
            local = tmp / f"training_results_{repo.round}" / name
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(data)
            converged, s_time, s_why, others = summarizer_run(local, rules)
            out = tmp / "out" / f"{repo.round}-{bench}-{i}"
            reached, d_time, task = daybreak_run(local, out)
            shutil.rmtree(out, ignore_errors=True)  # its mllog.log is a copy of the published log
            status = re.search(rb'"key": "run_stop".*?"status": "(\w+)"', data)
            # on time and quality: converged but for checks daybreak's verdict does not take (its time then read)
            on_tq = converged or (bool(others) and str(status.group(1).decode() if status else "") == "success")
            diff = abs(d_time - s_time) if reached and on_tq and d_time is not None and s_time is not None else None
            rows.append({**row, "readable": True, "bytes": len(data),
                         "status": status.group(1).decode() if status else None, "summarizer": converged,
                         "summarizer_s": s_time, "summarizer_why": s_why, "other_checks": others,
                         "daybreak": reached, "daybreak_s": d_time, "task": task,
                         "agrees": reached == converged and (diff is None or diff <= 0.001),
                         "agrees_on_time_and_quality": reached == on_tq and (diff is None or diff <= 0.001),
                         "diff_s": diff})
            local.unlink()
    return rows


def compare_scores(repo: Repo, wanted: list[tuple[str, str | None]], tmp: Path) -> list[dict]:
    """import-mlperf's score of every benchmark folder of the ``wanted`` (submitter, benchmark or None: all of
    them) against the summarizer's."""
    from mlperf_logging.result_summarizer import result_summarizer as rs

    from daybreak.leaderboard.mlperf_import import import_mlperf
    from daybreak.leaderboard.store.database import Store

    root = tmp / "scores" / repo.round / f"training_results_{repo.round}"

    def kept(f: str) -> bool:
        parts = f.split("/")
        for submitter, bench in wanted:
            if parts[0] != submitter:
                continue
            if re.match(r"^[^/]+/systems/[^/]+\.json$", f):
                return True
            if (RESULT.match(f) or f.endswith("/scaling.json")) and parts[1] == "results" and \
                    bench in (None, parts[3]):
                return True
        return False

    names = repo.names()
    for f in names:
        if kept(f):
            data = repo.read(f)
            if data is not None:
                (root / f).parent.mkdir(parents=True, exist_ok=True)
                (root / f).write_bytes(data)
        # the implementation folders (their names say which framework a benchmark used), without their code
        m = re.match(r"^([^/]+)/benchmarks/([^/]+)/implementations/([^/]+)/", f)
        if m and any(m.group(1) == s and b in (None, m.group(2)) for s, b in wanted):
            (root / m.group(1) / "benchmarks" / m.group(2) / "implementations" / m.group(3)).mkdir(parents=True,
                                                                                                 exist_ok=True)
    rows = []
    if not root.is_dir():
        return rows
    with Store(f"sqlite:///{tmp / f'scores-{repo.round}.sqlite'}") as store:
        import_mlperf(store, root)
        entries = {e.source.split("/results/")[1]: e for e in store.entries() if e.source_format == "mlperf-training"}
        for folder in sorted(root.glob("*/results/*/*")):
            system, bench = folder.parent.name, folder.name
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    minutes, _, _ = rs._compute_strong_score_standalone(bench, system, False, str(folder), "training",
                                                                         ruleset(repo.round))
                except Exception:  # noqa: BLE001 - a folder the summarizer cannot score
                    minutes = None
            entry = entries.get(f"{system}/{bench}")
            ours = entry.time_to_target_s if entry is not None else None
            theirs = minutes * 60.0 if minutes is not None else None
            agrees = (ours is None and theirs is None) or (
                ours is not None and theirs is not None and abs(ours - theirs) <= 0.001)
            rcp = (entry.document.get("rcp") if entry is not None else None) or {}
            rows.append({"round": repo.round, "submitter": folder.parent.parent.parent.name, "system": system,
                         "benchmark": bench, "daybreak_min": None if ours is None else ours / 60,
                         "summarizer_min": minutes, "agrees": agrees,
                         "framework": entry.framework if entry is not None else "-", "rcp": "" if not rcp else
                         f"{'pass' if rcp['passed'] else 'FAIL'} ({rcp['message']}), x{rcp['normalization']:.4f}"})
    return rows


def table(rows: list[dict]) -> str:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["benchmark"], r["round"])].append(r)
    lines = ["| benchmark | round | logs sampled | submitters | not success | agreeing | failing other checks only "
             "| agreeing on time and quality | worst abs(diff) |", "|---|---|---|---|---|---|---|---|---|"]
    for (bench, round_), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], ROUNDS.index(kv[0][1]))):
        read = [r for r in rs if r["readable"]]
        diffs = [r["diff_s"] for r in read if r["diff_s"] is not None]
        worst = f"{max(diffs) * 1000:.3f} ms" if diffs else "-"
        agreeing = sum(1 for r in read if r["agrees"])
        tq = sum(1 for r in read if r["agrees_on_time_and_quality"])
        lines.append(f"| {bench} | {round_} | {len(read)}{f' (+{len(rs) - len(read)} unreadable)' if len(rs) > len(read) else ''} "
                     f"| {len({r['submitter'] for r in read})} | {sum(1 for r in read if r['status'] != 'success')} | "
                     f"{agreeing} | {sum(1 for r in read if r['other_checks'])} | {tq} ({100 * tq / max(len(read), 1):.0f}%) "
                     f"| {worst} |")
    return "\n".join(lines)


def round_table(rows: list[dict]) -> str:
    """One row per round: the sample and how it agrees."""
    lines = ["| round | benchmarks | logs sampled | submitters | not success | agreeing | failing other checks only | "
             "agreeing on time and quality | worst abs(diff) |", "|---|---|---|---|---|---|---|---|---|"]
    for round_ in sorted({r["round"] for r in rows}, key=ROUNDS.index):
        read = [r for r in rows if r["round"] == round_ and r["readable"]]
        diffs = [r["diff_s"] for r in read if r["diff_s"] is not None]
        tq = sum(1 for r in read if r["agrees_on_time_and_quality"])
        lines.append(f"| {round_} | {len({r['benchmark'] for r in read})} | {len(read)} | "
                     f"{len({r['submitter'] for r in read})} | {sum(1 for r in read if r['status'] != 'success')} | "
                     f"{sum(1 for r in read if r['agrees'])} | {sum(1 for r in read if r['other_checks'])} | "
                     f"{tq} ({100 * tq / max(len(read), 1):.0f}%) | "
                     f"{f'{max(diffs) * 1000:.3f} ms' if diffs else '-'} |")
    return "\n".join(lines)


def parse_scores(text: str) -> dict[str, list[tuple[str, str | None]]]:
    """'v5.0:tinycorp,v3.1:NVIDIA/stable_diffusion' -> {'v5.0': [('tinycorp', None)], 'v3.1': [('NVIDIA', ...)]}."""
    out: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    for item in filter(None, (x.strip() for x in text.split(","))):
        round_, _, who = item.partition(":")
        submitter, _, bench = who.partition("/")
        if not who or normalize_round(round_) is None:
            raise SystemExit(f"--scores {item!r}: give ROUND:SUBMITTER[/BENCHMARK], e.g. v5.0:tinycorp")
        out[normalize_round(round_)].append((submitter, bench or None))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repos", nargs="*", type=Path,
                    help="training_results_v<round> checkouts, bare git directories or folders of their files")
    ap.add_argument("--mirror", type=Path, help="a folder holding the repositories of any rounds (fetch's "
                                                "owner+name/repo folders): every round of the table found there")
    ap.add_argument("--per-benchmark", type=int, default=8, help="logs sampled per benchmark per round (default 8)")
    ap.add_argument("--aborted", type=int, default=4,
                    help="logs whose run_stop is not success, per benchmark per round, beside them (default 4)")
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--scores", default=DEFAULT_SCORES, help="ROUND:SUBMITTER[/BENCHMARK],... whose folders' scores "
                                                             "are compared ('' for none)")
    ap.add_argument("--markdown", action="store_true",
                    help="print only the tables (those of docs/results/mlperf-agreement.md)")
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # the summarizer's checker logs each check
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the scratch copies of published logs go on the way out
    start = time.perf_counter()
    repos: dict[str, Path] = find_rounds(args.mirror) if args.mirror else {}
    for path in args.repos:
        repos[Repo(path).round] = path
    scores_wanted = parse_scores(args.scores)
    rows, scores = [], []
    with tempfile.TemporaryDirectory(prefix="daybreak-mlperf-agreement-") as tmp:
        for round_ in sorted(repos, key=ROUNDS.index):
            repo = Repo(repos[round_])
            got = compare_runs(repo, args.per_benchmark, args.aborted, args.seed, Path(tmp))
            rows += got
            if not args.markdown:
                print(f"{round_}: {sum(r['agrees'] for r in got if r['readable'])} of "
                      f"{sum(1 for r in got if r['readable'])} logs agree ({time.perf_counter() - start:.0f} s)",
                      file=sys.stderr)
                for r in got:
                    if r["readable"] and not r["agrees"]:
                        kind = "OTHER CHECKS" if r["agrees_on_time_and_quality"] else "DISAGREE"
                        print(f"{kind} {r['round']} {r['file']}: daybreak {r['daybreak']} {r['daybreak_s']} "
                              f"({r['task'][:160]}), summarizer {r['summarizer']} {r['summarizer_s']} "
                              f"{r['summarizer_why'][:160]} {' | '.join(r['other_checks'])[:200]}", file=sys.stderr)
            if scores_wanted.get(round_):
                scores += compare_scores(repo, scores_wanted[round_], Path(tmp))
    covered = sorted(repos, key=ROUNDS.index)
    missing = [r for r in ROUNDS if r not in repos]
    total = [r for r in rows if r["readable"]]
    print(f"Rounds read: {', '.join(covered) or 'none'}" + (f"; not available here: {', '.join(missing)}"
                                                             if missing else ""))
    print(f"{len(total)} logs ({sum(1 for r in total if r['status'] != 'success')} not success; "
          f"{len({(r['round'], r['submitter']) for r in total})} round x submitter pairs): "
          f"{sum(r['agrees_on_time_and_quality'] for r in total)} agree on time and quality; "
          f"{sum(r['agrees'] for r in total)} agree with the summarizer's verdict exactly, the other "
          f"{sum(1 for r in total if r['other_checks'] and r['agrees_on_time_and_quality'] and not r['agrees'])} "
          "failing only compliance checks that concern neither (hyperparameters, weight initialization records)")
    other = defaultdict(int)
    for r in total:
        for m in r["other_checks"]:
            other[re.sub(r"\s+", " ", m)[:90]] += 1
    for m, n in sorted(other.items(), key=lambda kv: -kv[1]):
        print(f"  {n} x {m}")
    print()
    print(round_table(rows))
    print()
    print(table(rows))
    if scores:
        print()
        print(f"import-mlperf scores vs the summarizer's: {sum(s['agrees'] for s in scores)} of {len(scores)} "
              "system x benchmark folders agree")
        print()
        print("| round | submitter | system | benchmark | daybreak (min) | summarizer (min) | agrees | framework | RCP |")
        print("|---|---|---|---|---|---|---|---|---|")
        for s in scores:
            d = "-" if s["daybreak_min"] is None else f"{s['daybreak_min']:.3f}"
            m = "-" if s["summarizer_min"] is None else f"{s['summarizer_min']:.3f}"
            print(f"| {s['round']} | {s['submitter']} | {s['system']} | {s['benchmark']} | {d} | {m} | "
                  f"{'yes' if s['agrees'] else 'NO'} | {s['framework']} | {s['rcp']} |")
    if not args.markdown:
        print(f"\n{time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0 if all(r["agrees_on_time_and_quality"] for r in total) and all(s["agrees"] for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
