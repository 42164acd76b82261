"""CLI: `daybreak leaderboard import|show|serve|export`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from daybreak.errors import ConfigError

DB_HELP = ("database URL (sqlite:///FILE, postgresql+psycopg://USER:PASS@HOST/DB) or a SQLite file path; "
           "default: $DAYBREAK_DB, else leaderboard.sqlite in the user data directory")


def register(sub: argparse._SubParsersAction) -> None:
    from daybreak.leaderboard.ranking import OBJECTIVES

    p = sub.add_parser(
        "leaderboard",
        help="import submissions, rank them, serve the leaderboard web site",
        description="DAWNBench-style leaderboard: import daybreak runs and DAWNBench v1 submissions, rank them on "
                    "train-time, train-cost, latency and inference-cost, serve or export the web pages.",
    )
    lsub = p.add_subparsers(dest="leaderboard_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    q = lsub.add_parser(
        "import", help="validate and store submissions (run dirs, DAWNBench v1 trees or files)",
        description="Store daybreak run directories (result.json, inference.json) and DAWNBench v1 submissions "
                    "(a CIFAR10|ImageNet|SQuAD/train|inference tree, or JSON files; a training JSON's TSV is the "
                    "file of the same name ending .tsv). Each file that cannot be used is reported with its reason; "
                    "nothing partial is stored; the same content is never stored twice.")
    q.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    q.add_argument("--db", metavar="URL", help=DB_HELP)
    q.add_argument("--task", help="the task of DAWNBench files outside a CIFAR10/ImageNet/SQuAD folder")
    q.add_argument("--json", action="store_true", help="print the import report as JSON")
    q.add_argument("--quiet", "-q", action="store_true", help="print only problems and the summary")
    q.set_defaults(func=cmd_import)

    s = lsub.add_parser("show", help="print one ranked table",
                        description="Print the ranking of one task on one objective (smaller is better; ties go to "
                                    "the earlier submission).")
    s.add_argument("--task", required=True, help="cifar10, imagenet, squad, digits, mnist")
    s.add_argument("--objective", required=True, choices=list(OBJECTIVES))
    s.add_argument("--top", type=int, metavar="N", help="only the first N rows")
    s.add_argument("--json", action="store_true",
                   help="print the rows as JSON: rank, value (seconds / USD / ms), display, model, hardware, "
                        "framework, date, source, ...")
    s.add_argument("--db", metavar="URL", help=DB_HELP)
    s.set_defaults(func=cmd_show)

    v = lsub.add_parser("serve", help="serve the leaderboard web site and its JSON API",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                        description="Serve the pages, the JSON API under /api/ and the submission endpoint "
                                    "POST /api/submissions (open only with --token-file).")
    v.add_argument("--host", default="127.0.0.1")
    v.add_argument("--port", type=int, default=8000)
    v.add_argument("--db", metavar="URL", help=DB_HELP)
    v.add_argument("--token-file", type=Path, metavar="FILE",
                   help="submitter tokens, one per line (TOKEN or NAME TOKEN); without it submissions are closed")
    v.set_defaults(func=cmd_serve)

    e = lsub.add_parser("export", help="write the web pages as a static site",
                        description="Write index.html, one page per task x objective, one page per entry and the "
                                    "JSON API files under DIR.")
    e.add_argument("dir", type=Path, metavar="DIR")
    e.add_argument("--db", metavar="URL", help=DB_HELP)
    e.set_defaults(func=cmd_export)


def cmd_import(args: argparse.Namespace) -> int:
    from daybreak.leaderboard.importer import import_paths
    from daybreak.leaderboard.store import Store
    from daybreak.leaderboard.tasks import get_task

    if args.task is not None:
        get_task(args.task)
    with Store(args.db) as store:
        report = import_paths(store, list(args.paths), task=args.task)
        if args.json:
            print(json.dumps(report.to_json(), indent=2))
        else:
            for o in report.outcomes:
                if o.status == "skipped":
                    print(f"skipped {o.path}: {o.reason}", file=sys.stderr)
                elif not args.quiet:
                    print(f"{'stored   ' if o.status == 'stored' else 'unchanged'} {o.path} (entry {o.entry_id})")
            print(f"imported into {store.display_url}: {report.summary()}")
    return 1 if report.skipped else 0


def _table(rows: list[dict], header: str) -> str:
    cols = [("rank", "#", 4), ("display", header, 12), ("model", "model", 34), ("hardware", "hardware", 40),
            ("framework", "framework", 22), ("date", "date", 10)]
    widths = []
    for key, title, cap in cols:
        width = max([len(title), *(len(str(r[key])) for r in rows)])
        widths.append(min(width, cap) if key not in ("rank", "display", "date") else width)

    def cut(text: str, width: int) -> str:
        return text if len(text) <= width else text[: width - 1] + "…"

    lines = ["  ".join(cut(title, w).ljust(w) for (_, title, _), w in zip(cols, widths)).rstrip()]
    for r in rows:
        lines.append("  ".join(cut(str(r[key]), w).ljust(w) for (key, _, _), w in zip(cols, widths)).rstrip())
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    from daybreak.leaderboard.ranking import get_objective, leaderboard
    from daybreak.leaderboard.store import Store
    from daybreak.leaderboard.tasks import get_task

    task = get_task(args.task)
    objective = get_objective(args.objective)
    if args.top is not None and args.top < 1:
        raise ConfigError("--top must be at least 1")
    with Store(args.db) as store:
        rows = leaderboard(store, task.name, objective, top=args.top)
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

    from daybreak.leaderboard.store import Store
    from daybreak.leaderboard.web import create_app, load_tokens

    if not 0 < args.port < 65536:
        raise ConfigError(f"--port {args.port}: not a TCP port")
    tokens = load_tokens(args.token_file) if args.token_file else None
    store = Store(args.db)
    app = create_app(store, tokens=tokens)
    state = f"open to {len(tokens)} token(s)" if tokens else "closed (no --token-file)"
    print(f"daybreak leaderboard on http://{args.host}:{args.port}/ (database {store.display_url}; "
          f"submissions {state})", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from daybreak.leaderboard.site import Site
    from daybreak.leaderboard.store import Store

    if args.dir.exists() and not args.dir.is_dir():
        raise ConfigError(f"{args.dir}: exists and is not a folder")
    with Store(args.db) as store:
        try:
            count = Site(store).export(args.dir)
        except OSError as e:
            raise ConfigError(f"{args.dir}: cannot write the site ({e.strerror or e})") from None
    print(f"wrote {count} files to {args.dir} (open {args.dir / 'index.html'})")
    return 0
