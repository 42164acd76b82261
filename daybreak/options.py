"""Command-line options shared by several commands, declared once."""

from __future__ import annotations

import argparse

from daybreak.errors import ConfigError


def add_rules_argument(p: argparse.ArgumentParser) -> None:
    """``--rules`` (and its deprecated alias ``--count-eval``) for every command that produces a time-to-target."""
    from daybreak.rules import DEFAULT_RULES, RULE_SETS

    p.add_argument("--rules", choices=list(RULE_SETS), default=None,
                   help=f"clock rule set of the headline figures (default {DEFAULT_RULES}): dawnbench counts data "
                        "loading, model init and compile/warm-up and excludes evaluation and record writes; mlperf "
                        "runs from the first touch of the dataset without pausing (evaluation included). Every "
                        "record holds both figures.")
    p.add_argument("--count-eval", action="store_true", help="deprecated: the same as --rules mlperf")


def resolve_rules(args: argparse.Namespace) -> str:
    from daybreak.rules import DEFAULT_RULES

    if getattr(args, "count_eval", False):
        if args.rules not in (None, "mlperf"):
            raise ConfigError(f"--count-eval means --rules mlperf; it contradicts --rules {args.rules}")
        return "mlperf"
    return args.rules or DEFAULT_RULES
