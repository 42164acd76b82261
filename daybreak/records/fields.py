"""Constrained field types of daybreak's records: what every record daybreak writes holds.

A record breaking one of these (a batch of 0 examples, a price of -1 USD, an inference accuracy of 1.5) was not
written by daybreak; loading it fails with the field's name. Only what every writer guarantees is declared here:
values that come from another program's claims (a `daybreak time` record's accuracies, epochs and steps, read
from the program's log) are checked where they are used, by the leaderboard's plausibility rules.

Every metric daybreak records (top-1, top-5, F1) is a fraction of the eval set, so a measured accuracy is a
:data:`Fraction`.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Callable, Collection

from pydantic import AfterValidator, Field

Count = Annotated[int, Field(ge=1)]  # how many: processes, nodes, threads, examples, a batch, steps per epoch
Index = Annotated[int, Field(ge=0)]  # how many so far (0 included): optimizer steps, recompilations, GPUs
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]  # an accuracy measured by daybreak, a share, a p-value
Target = Annotated[float, Field(gt=0.0, le=1.0)]  # a target accuracy: options.parse_target's (0, 1]
Seconds = Annotated[float, Field(ge=0.0)]  # a duration measured by daybreak
NonNegative = Annotated[float, Field(ge=0.0)]  # USD, USD per hour, joules, watts, GB, epochs, CPU seconds
Positive = Annotated[float, Field(gt=0.0)]  # a factor, a mean latency, a rate


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$", re.ASCII)


def _iso_date(value: str) -> str:
    try:
        if not _DATE.match(value):
            raise ValueError
        date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"must be a date YYYY-MM-DD, not {value[:40]!r}") from None
    return value


IsoDate = Annotated[str, AfterValidator(_iso_date)]  # YYYY-MM-DD, as the price catalog writes price_date


def one_of(values: Collection[str], what: str = "") -> Callable[[str], str]:
    """A validator: the value must be one of ``values`` (a record daybreak wrote names only what it knows)."""
    def check(value: str) -> str:
        if value not in values:
            kind = f"a {what} " if what else ""
            raise ValueError(f"must be {kind}({', '.join(values)}), not {str(value)[:40]!r}")
        return value

    return check
