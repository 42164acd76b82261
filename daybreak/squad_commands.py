"""CLI: `daybreak evaluate-squad DATASET.json PREDICTIONS.json`: SQuAD v1.1 exact match and F1."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

from daybreak.commands_index import help_of


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from daybreak.config import RunConfig
    from daybreak.options import add_flags

    p = sub.add_parser(
        "evaluate-squad",
        help=help_of("evaluate-squad"),
        description="Score a predictions file ({\"question id\": \"answer text\", ...}) against a SQuAD v1.1 dataset "
                    "file, with the official v1.1 rules: answers are lower-cased, stripped of punctuation and of the "
                    "articles a/an/the, whitespace-folded; exact match and token F1 take the best ground truth; a "
                    "question without a prediction scores 0 (a line on stderr says so). Prints "
                    "{\"exact_match\": .., \"f1\": ..} in percent on its last line.",
    )
    p.add_argument("dataset", type=Path, metavar="DATASET.json", help="e.g. dev-v1.1.json")
    p.add_argument("predictions", type=Path, metavar="PREDICTIONS.json", help="question id -> answer text")
    add_flags(p, RunConfig, "evaluate-squad")
    p.set_defaults(func=cmd_evaluate_squad)


def cmd_evaluate_squad(args: argparse.Namespace) -> int:
    from daybreak.data.squad_eval import evaluate_files

    result = evaluate_files(args.dataset, args.predictions, stderr=io.StringIO() if getattr(args, "quiet", False) else sys.stderr)
    print(json.dumps(result))
    return 0
