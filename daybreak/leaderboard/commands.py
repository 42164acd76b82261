"""CLI: `daybreak leaderboard import|import-mlperf|show|score|serve|export|reproduce|worker`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from daybreak.commands_index import help_of
from daybreak.errors import ConfigError
from daybreak.executors import ExecutorOptions
from daybreak.options import HelpFormatter

if TYPE_CHECKING:
    import socket
    from types import FrameType

    from daybreak.leaderboard.store.database import Store

DB_HELP = ("database URL (sqlite:///FILE, postgresql+psycopg://USER:PASS@HOST/DB) or a SQLite file path; "
           "default: $DAYBREAK_DB, else leaderboard.sqlite in the user data directory")
# import and serve make the database (folder, file, tables) when it does not exist; the others need an existing one
DB_CREATE_HELP = DB_HELP + "; created (with its folder) when it does not exist"
DB_EXISTING_HELP = DB_HELP + "; must exist (nothing is created: a missing one is an error, exit status 2)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from daybreak.config import RunConfig
    from daybreak.leaderboard.ranking.objectives import OBJECTIVES
    from daybreak.mlperf_benchmarks import rounds_text
    from daybreak.options import add_dataclass_flags, add_flags

    p = sub.add_parser(
        "leaderboard",
        help=help_of("leaderboard"),
        description="DAWNBench-style leaderboard: import daybreak runs and DAWNBench v1 submissions, rank them on "
                    "train-time, train-cost, latency and inference-cost, serve or export the web pages.",
    )
    lsub = p.add_subparsers(dest="leaderboard_command", metavar="SUBCOMMAND")

    def usage(args: argparse.Namespace) -> int:  # `daybreak leaderboard` without a subcommand
        p.print_help()
        return 2

    p.set_defaults(func=usage)

    q = lsub.add_parser(
        "import", help="validate and store submissions (run dirs, DAWNBench v1 trees or files)",
        description="Store daybreak run directories (result.json, inference.json) and DAWNBench v1 submissions "
                    "(a CIFAR10|ImageNet|SQuAD/train|inference tree, or JSON files; a training JSON's TSV is the "
                    "file of the same name ending .tsv). Each file that cannot be used is reported with its reason; "
                    "nothing partial is stored; the same content is never stored twice.")
    q.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    q.add_argument("--db", metavar="URL", help=DB_CREATE_HELP)
    q.add_argument("--task", help="the task of DAWNBench files outside a CIFAR10/ImageNet/SQuAD folder")
    q.add_argument("--json", action="store_true", help="print the import report as JSON")
    add_flags(q, RunConfig, "import")
    q.set_defaults(func=cmd_import)

    m = lsub.add_parser(
        "import-mlperf", help="score and store a published MLPerf Training results tree (one entry per system and "
                              "benchmark)",
        description="Read a checkout of an MLPerf Training results round (github.com/mlcommons/training_results_vX.Y: "
                    "<submitter>/results/<system>/<benchmark>/result_*.txt and <submitter>/systems/<system>.json), "
                    "or one submitter's folder of it, and store one entry per system and benchmark, scored by "
                    "MLPerf's rule: the olympic mean of the round's required runs (fastest and slowest dropped; a "
                    "run that did not converge counts as the slowest), each run's time run_stop - run_start as "
                    "`daybreak time --log` reads it. ResNet-50 goes on the imagenet board beside DAWNBench's entries "
                    "(its rows say they follow MLPerf's rules); every other benchmark on its own mlperf-* board. "
                    "Entries are self-reported, with the round, division and availability. Each file or folder that "
                    "cannot be used is reported on one line (exit status 1); the same content is never stored "
                    "twice.")
    m.add_argument("dir", type=Path, metavar="DIR")
    m.add_argument("--round", metavar="vX.Y",
                   help=f"the round ({rounds_text()}); default: from the folder's name, training_results_vX.Y")
    m.add_argument("--db", metavar="URL", help=DB_HELP)
    m.add_argument("--json", action="store_true", help="print the import report as JSON")
    add_flags(m, RunConfig, "import")
    m.set_defaults(func=cmd_import_mlperf)

    s = lsub.add_parser("show", help="print one ranked table",
                        description="Print the ranking of one task on one objective (smaller is better; ties go to "
                                    "the earlier submission).")
    s.add_argument("--task", required=True,
                   help="cifar10, imagenet, squad, digits, mnist, or an MLPerf benchmark's board (mlperf-bert, ...)")
    s.add_argument("--objective", required=True, choices=list(OBJECTIVES))
    s.add_argument("--top", type=int, metavar="N", help="only the first N rows")
    s.add_argument("--provenance", metavar="P[,P]",
                   help="only entries of this provenance: reproduced, daybreak-run, self-reported (comma-separated)")
    s.add_argument("--json", action="store_true",
                   help="print the rows as JSON: rank, value (seconds / USD / ms), display, model, hardware, "
                        "framework, date, source, provenance, runs, p_value_vs_above, ...")
    s.add_argument("--db", metavar="URL", help=DB_EXISTING_HELP)
    s.set_defaults(func=cmd_show)

    register_score(lsub)

    v = lsub.add_parser("serve", help="serve the leaderboard web site and its JSON API",
                        formatter_class=HelpFormatter,
                        description="Serve the pages, the JSON API under /api/ and the submission endpoint "
                                    "POST /api/submissions (open only with --token-file). The limits below are "
                                    "enforced by daybreak itself; behind a reverse proxy (nginx, Caddy) set the "
                                    "proxy's own limits too (docs/how-to/leaderboard.md: nginx and Caddy "
                                    "configurations).",
                        epilog="Exit status: 130 when stopped (Ctrl-C or SIGTERM, after a graceful shutdown); 2 "
                               "a usage error, a database that cannot be opened, or an address it cannot listen "
                               "on (the port already in use, a --host that is not this machine's), with one line "
                               "on stderr (the address is checked first: a port in use creates no database).")
    v.add_argument("--host", default="127.0.0.1")
    v.add_argument("--port", type=int, default=8000)
    v.add_argument("--db", metavar="URL", help=DB_CREATE_HELP)
    v.add_argument("--token-file", type=Path, metavar="FILE",
                   help="submitter tokens, one per line (TOKEN or NAME TOKEN); without it submissions are closed")
    from daybreak.leaderboard.web.limits import Limits

    add_dataclass_flags(v, Limits, "limits: what one client may hold of the server and make it do (a client is an "
                                   "address, an IPv6 /64, or behind --trusted-proxy the forwarded address)")
    v.set_defaults(func=cmd_serve)

    r = lsub.add_parser(
        "reproduce", help="re-run an entry on this machine from its recorded configuration",
        description="Re-run a leaderboard entry that names a daybreak task and recipe (a daybreak run or a "
                    "multi-run repeat entry) from its recorded configuration (recipe, hyperparameters, seed(s), rule "
                    "set, device count) on this machine, store the reproduction as its own entry linked to the "
                    "original, and mark the original reproduced when the reproduction reaches the target. With "
                    "--queue, only queue it for `daybreak leaderboard worker`.")
    r.add_argument("entry", metavar="ENTRY", help="the entry's id (as in /entries/ID)")
    r.add_argument("--db", metavar="URL", help=DB_EXISTING_HELP)
    r.add_argument("--queue", action="store_true", help="queue a job for the worker instead of running it now")
    r.add_argument("--work-dir", type=Path, metavar="DIR",
                   help="where the reproduction's run directories go (default: reproductions/ in the user data "
                        "directory)")
    r.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="stop a run that takes longer than this (default: 4 hours)")
    add_flags(r, RunConfig, "reproduce")
    add_dataclass_flags(r, ExecutorOptions, "where the runs go (--executor slurm: one job array per reproduction)")
    r.set_defaults(func=cmd_reproduce)

    w = lsub.add_parser(
        "worker", help="run queued reproductions, one at a time",
        description="Take reproduction jobs queued by the server (POST /api/entries/ID/reproduce) or by "
                    "`reproduce --queue` from the database and run them one at a time. Jobs are rows of the "
                    "database: they survive a restart; a job left running by a worker that stopped is queued again "
                    "(at most --max-attempts times); a job that fails is recorded failed with its reason.")
    w.add_argument("--db", metavar="URL", help=DB_EXISTING_HELP)
    w.add_argument("--work-dir", type=Path, metavar="DIR", help="where the run directories go (default: "
                                                                "reproductions/ in the user data directory)")
    w.add_argument("--once", action="store_true", help="run the queued jobs, then exit")
    w.add_argument("--poll", type=float, default=5.0, metavar="S", help="seconds between looks at the queue")
    w.add_argument("--timeout", type=float, default=None, metavar="S", help="per run (default: 4 hours)")
    add_flags(w, RunConfig, "worker")
    w.add_argument("--stale-after", type=float, default=120.0, metavar="S",
                   help="a running job without a heartbeat for this long is the job of a stopped worker")
    w.add_argument("--max-attempts", type=int, default=2, metavar="N", help="attempts of a job whose worker stopped")
    add_dataclass_flags(w, ExecutorOptions, "where each job's runs go (--executor slurm: one job array per "
                                            "reproduction; the worker waits for it)")
    w.set_defaults(func=cmd_worker)

    e = lsub.add_parser("export", help="write the web pages as a static site",
                        description="Write index.html, one page per task x objective, one page per entry and the "
                                    "JSON API files under DIR. A symbolic link inside DIR is refused before "
                                    "anything is written, and every file is written through descriptors of the "
                                    "folders it checked: a folder swapped for a link mid-way changes nothing.")
    e.add_argument("dir", type=Path, metavar="DIR")
    e.add_argument("--db", metavar="URL", help=DB_EXISTING_HELP)
    e.set_defaults(func=cmd_export)


def _say_migrated(store: Store) -> None:
    for line in store.migrated:
        print(f"daybreak: {store.display_url}: {line}", file=sys.stderr)


def cmd_import(args: argparse.Namespace) -> int:
    from daybreak.leaderboard.ingest.importer import import_paths
    from daybreak.leaderboard.ingest.text_rules import printable
    from daybreak.leaderboard.store.database import Store
    from daybreak.leaderboard.tasks import leaderboard_task

    if args.task is not None and leaderboard_task(args.task).clock_rules == "mlperf":
        raise ConfigError(f"--task {args.task}: an MLPerf benchmark's board takes MLPerf results only; import them "
                          "with `daybreak leaderboard import-mlperf DIR`")
    with Store(args.db) as store:
        _say_migrated(store)
        report = import_paths(store, list(args.paths), task=args.task)
        if args.json:
            print(json.dumps(report.to_json(), indent=2))
        else:
            # file names come from the folder imported: control characters are printed as escapes
            for o in report.outcomes:
                if o.status == "skipped":
                    print(printable(f"skipped {o.path}: {o.reason}"), file=sys.stderr)
                elif not getattr(args, "quiet", False):
                    print(printable(f"{'stored   ' if o.status == 'stored' else 'unchanged'} {o.path} "
                                    f"(entry {o.entry_id})"))
            print(f"imported into {store.display_url}: {report.summary()}")
    return 1 if report.skipped else 0


def cmd_import_mlperf(args: argparse.Namespace) -> int:
    from daybreak.leaderboard.mlperf_import import import_mlperf, resolve_round
    from daybreak.leaderboard.store.database import Store
    from daybreak.leaderboard.ingest.text_rules import printable

    resolve_round(args.dir, args.round)  # a wrong folder or round is a one-line error before the database opens
    with Store(args.db) as store:
        _say_migrated(store)
        round_, report = import_mlperf(store, args.dir, args.round)
        if args.json:
            print(json.dumps({"round": round_, **report.to_json()}, indent=2))
        else:
            for o in report.outcomes:
                if o.status == "skipped":
                    print(printable(f"skipped {o.path}: {o.reason}"), file=sys.stderr)
                elif not getattr(args, "quiet", False):
                    state = "stored   " if o.status == "stored" else "unchanged"
                    print(printable(f"{state} {o.path} (entry {o.entry_id}" + (f"; {o.reason})" if o.reason else ")")))
            print(f"imported MLPerf Training {round_} into {store.display_url}: {report.summary()}")
    return 1 if report.skipped else 0


def _table(rows: list[dict[str, Any]], header: str) -> str:
    cols = [("rank", "#", 4), ("display", header, 12), ("model", "model", 34), ("hardware", "hardware", 40),
            ("framework", "framework", 22), ("date", "date", 10), ("provenance", "provenance", 13),
            ("rules_text", "rules", 24), ("runs_text", "runs", 30)]
    for r in rows:
        r["rules_text"] = r.get("rules") or "DAWNBench v1"
        runs = r.get("runs")
        cv = "-" if not runs or runs["cv"] is None else f"{runs['cv'] * 100:.1f}%"
        text = "" if not runs else f"{runs['n']} runs, CV {cv}, {runs['reached_fraction'] * 100:.0f}% reached"
        if r.get("p_value_vs_above") is not None or r.get("significant_vs_above") is not None:
            p = r.get("p_value_vs_above")
            text += ("; " if text else "") + ("significant" if r["significant_vs_above"] else "not significant") + \
                (f" vs #{r['rank'] - 1} (p={p:.2g})" if p is not None else f" vs #{r['rank'] - 1}")
        r["runs_text"] = text
    widths = []
    for key, title, cap in cols:
        width = max([len(title), *(len(str(r[key])) for r in rows)])
        widths.append(min(width, cap) if key not in ("rank", "display", "date", "provenance") else width)

    def cut(text: str, width: int) -> str:
        return text if len(text) <= width else text[: width - 1] + "…"

    lines = ["  ".join(cut(title, w).ljust(w) for (_, title, _), w in zip(cols, widths)).rstrip()]
    for r in rows:
        lines.append("  ".join(cut(str(r[key]), w).ljust(w) for (key, _, _), w in zip(cols, widths)).rstrip())
        del r["runs_text"], r["rules_text"]
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    from daybreak.leaderboard.ranking.objectives import get_objective, leaderboard, parse_provenance
    from daybreak.leaderboard.store.database import Store
    from daybreak.leaderboard.tasks import leaderboard_task

    task = leaderboard_task(args.task)
    objective = get_objective(args.objective)
    if args.top is not None and args.top < 1:
        raise ConfigError("--top must be at least 1")
    provenance = parse_provenance(args.provenance)
    with Store(args.db, create=False) as store:
        _say_migrated(store)
        rows = leaderboard(store, task.name, objective, top=args.top, provenance=provenance)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{task.title}: {objective.title} (target {task.target_label}; smaller is better)")
    if not rows:
        print("no entries")
        return 0
    print(_table(rows, objective.header))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from daybreak.leaderboard.store.database import Store
    from daybreak.leaderboard.web.app import create_app, load_tokens, server_config
    from daybreak.leaderboard.web.limits import Limits
    from daybreak.options import dataclass_from_args

    if not 0 < args.port < 65536:
        raise ConfigError(f"--port {args.port}: not a TCP port")
    limits = dataclass_from_args(Limits, args).check()
    tokens = load_tokens(args.token_file) if args.token_file else None
    sock = listen_socket(args.host, args.port)  # before the database: a port in use creates nothing
    try:
        store = Store(args.db)
        _say_migrated(store)
        app = create_app(store, tokens=tokens, limits=limits)
        state = f"open to {len(tokens)} token(s)" if tokens else "closed (no --token-file)"
        print(f"daybreak leaderboard on http://{args.host}:{args.port}/ (database {store.display_url}; "
              f"submissions {state})", file=sys.stderr)
        uvicorn.Server(server_config(app, args.host, args.port, limits)).run(sockets=[sock])
    finally:
        sock.close()
    return 0


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (uvicorn listens on it), or a one-line ConfigError (exit status 2): the port
    in use, or a host that is not an address of this machine. Bound here rather than by uvicorn, which logs the
    error and exits with its own status 3."""
    import errno
    import os
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as e:
        raise ConfigError(f"--host {host}: cannot resolve it ({getattr(e, 'strerror', None) or e})") from None
    sock = socket.socket(family, kind, proto)
    try:
        if os.name == "posix":  # as asyncio does: a restarted server can rebind at once
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except OSError as e:
        sock.close()
        hints: dict[int | None, str] = {
            errno.EADDRINUSE: " (another program listens there: stop it, or pick another --port)",
            errno.EADDRNOTAVAIL: " (not an address of this machine: see --host)",
            errno.EACCES: " (ports below 1024 need privileges)"}
        hint = hints.get(e.errno, "")
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}{hint}") from None
    return sock


def cmd_export(args: argparse.Namespace) -> int:
    from daybreak.leaderboard.store.database import Store
    from daybreak.leaderboard.web.export import export_site, no_links
    from daybreak.leaderboard.web.pages import Site

    if args.dir.exists() and not args.dir.is_dir():
        raise ConfigError(f"{args.dir}: exists and is not a folder")
    no_links(args.dir)  # before the database is opened: nothing is read or written
    with Store(args.db, create=False) as store:
        try:
            count = export_site(Site(store), args.dir)
        except OSError as e:
            raise ConfigError(f"{args.dir}: cannot write the site ({e.strerror or e})") from None
    print(f"wrote {count} files to {args.dir} (open {args.dir / 'index.html'})")
    return 0


def _work_dir(path: Path | None) -> Path:
    if path is not None:
        return path
    from platformdirs import user_data_dir

    return Path(user_data_dir("daybreak")) / "reproductions"


def _entry_id(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 10 or int(text) > 2**31 - 1:
        raise ConfigError(f"ENTRY {text!r}: give an entry id (a whole number, as in /entries/ID)")
    return int(text)


def _price(args: argparse.Namespace) -> float | None:
    from daybreak.config import RunConfig
    from daybreak.options import values_for

    price: float | None = values_for(RunConfig, args, "reproduce")["cost_per_hour"]
    return price


def _executor(args: argparse.Namespace) -> ExecutorOptions:
    """The executor options given (checked now: a bad one is one line before anything runs)."""
    from daybreak.executors import check_options
    from daybreak.options import dataclass_from_args

    executor: ExecutorOptions = dataclass_from_args(ExecutorOptions, args)
    check_options(executor)
    return executor


def cmd_reproduce(args: argparse.Namespace) -> int:
    from daybreak.leaderboard.reproduce.plan import ReproduceError, plan_for
    from daybreak.leaderboard.reproduce.worker import DEFAULT_TIMEOUT_S, reproduce
    from daybreak.leaderboard.store.database import Store

    entry_id = _entry_id(args.entry)
    if args.timeout is not None and not args.timeout > 0:
        raise ConfigError("--timeout must be greater than 0")
    executor = _executor(args)
    with Store(args.db, create=False) as store:
        _say_migrated(store)
        entry = store.get(entry_id)
        if entry is None:
            raise ConfigError(f"no entry {entry_id} in {store.display_url}")
        try:
            plan = plan_for(entry)
        except ReproduceError as e:
            raise ConfigError(f"entry {entry_id} cannot be reproduced: {e}") from None
        if args.queue:
            job, created = store.enqueue(entry_id, "cli")
            print(f"{'queued' if created else 'already queued'}: job {job.id} reproduces entry {entry_id} "
                  f"({plan.describe()}); run `daybreak leaderboard worker` to work the queue")
            return 0
        try:
            outcome = reproduce(store, entry_id, work_dir=_work_dir(args.work_dir),
                                timeout_s=args.timeout or DEFAULT_TIMEOUT_S, cost_per_hour=_price(args),
                                executor=executor)
        except ReproduceError as e:
            print(f"daybreak: reproduction of entry {entry_id} failed: {e}", file=sys.stderr)
            return 1
    print(f"entry {entry_id}: {outcome.message}")
    return 0 if outcome.reached else 3


def cmd_worker(args: argparse.Namespace) -> int:
    import signal

    from daybreak.leaderboard.reproduce.worker import DEFAULT_TIMEOUT_S, WorkerOptions, work
    from daybreak.leaderboard.store.database import Store

    if args.timeout is not None and not args.timeout > 0:
        raise ConfigError("--timeout must be greater than 0")
    if not args.poll > 0 or not args.stale_after > 0 or args.max_attempts < 1:
        raise ConfigError("--poll and --stale-after must be greater than 0, --max-attempts at least 1")

    def stop(signum: int, frame: FrameType | None) -> NoReturn:  # SIGTERM like Ctrl-C: the running job is queued again
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    options = WorkerOptions(work_dir=_work_dir(args.work_dir), poll_s=args.poll, once=args.once,
                            timeout_s=args.timeout or DEFAULT_TIMEOUT_S, cost_per_hour=_price(args),
                            stale_after_s=args.stale_after, heartbeat_s=max(0.5, min(15.0, args.stale_after / 4)),
                            max_attempts=args.max_attempts, executor=_executor(args))
    with Store(args.db, create=False) as store:
        _say_migrated(store)
        print(f"daybreak: reproduction worker on {store.display_url} (run directories under {options.work_dir})",
              file=sys.stderr)
        try:
            summary = work(store, options)
        except KeyboardInterrupt:
            print("daybreak: worker stopped", file=sys.stderr)
            return 130
    print(f"daybreak: {summary.line()}", file=sys.stderr)
    return 0


# --- score: AlgoPerf's cross-task score of the entries (daybreak.leaderboard.ranking.score) ---------------------

def register_score(lsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from daybreak.analysis.stats import R_MAX
    from daybreak.leaderboard.ranking.score import GROUP_BY

    c = lsub.add_parser(
        "score", formatter_class=HelpFormatter,
        help="AlgoPerf's cross-task score of the entries, grouped by author, system, model or framework",
        description="Treat the training entries of one author (or one system, model, framework: --by) as one "
                    "multi-task submission and score it across the tasks like `daybreak analyze score`: per task "
                    "the group's best ranked training time, r = it / the best group's, score = the mean over the "
                    "tasks of max(0, (r_max - r) / (r_max - 1)), 0 where the group has no ranked entry. Entries "
                    "without a value of the --by field take no part.")
    c.add_argument("--by", default="author", choices=GROUP_BY, help="what makes a multi-task submission")
    c.add_argument("--task", action="append", metavar="TASK[,TASK]",
                   help="score these tasks only (default: every task with a ranked training entry)")
    c.add_argument("--r-max", type=float, default=R_MAX, metavar="R",
                   help="the ratio to the best at which a task scores 0 (AlgoPerf's 4)")
    c.add_argument("--provenance", metavar="P[,P]",
                   help="only entries of this provenance: reproduced, daybreak-run, self-reported (comma-separated)")
    c.add_argument("--top", type=int, metavar="N", help="print only the first N groups")
    c.add_argument("--json", action="store_true", help="print the scores as JSON")
    c.add_argument("--db", metavar="URL", help=DB_EXISTING_HELP)
    c.set_defaults(func=cmd_score)


def cmd_score(args: argparse.Namespace) -> int:
    from daybreak.analysis.stats import r_max_option
    from daybreak.leaderboard.ranking.objectives import parse_provenance
    from daybreak.leaderboard.ranking.score import format_score, leaderboard_score
    from daybreak.leaderboard.store.database import Store
    from daybreak.leaderboard.tasks import leaderboard_task

    if args.top is not None and args.top < 1:
        raise ConfigError("--top must be at least 1")
    tasks = [t.strip() for item in args.task or [] for t in item.split(",") if t.strip()] or None
    for task in tasks or []:
        leaderboard_task(task)  # a one-line error before the database is opened
    r_max_option(args.r_max)  # a one-line error before the database is opened
    provenance = parse_provenance(args.provenance)
    with Store(args.db, create=False) as store:
        _say_migrated(store)
        result = leaderboard_score(store, by=args.by, tasks=tasks, r_max=args.r_max, provenance=provenance)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_score(result, top=args.top))
    return 0
