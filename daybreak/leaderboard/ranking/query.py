"""What a board shows: its filters, its order and an optional reference entry, read from query parameters with a
one-line error for a bad value, and written back as a link's parameters.

``?accelerator=NVIDIA+V100&framework=PyTorch&min_count=8&max_count=64&since=2018-01-01&until=2019-06-30&year=2018``
``&provenance=reproduced,daybreak-run&rules=mlperf&division=closed&availability=available``
``&sort=date&order=desc&ref=12``

Filters combine (AND); accelerator and framework match the structured names case-insensitively (``NVIDIA V100``,
``PyTorch``). ``sort`` is one of :data:`SORTS` (``rank``: the objective's value, the default), ``order`` ``asc`` or
``desc``. ``ref`` is an entry id: each row's value is also shown as a ratio to that entry's.

The store turns a query into SQL (daybreak.leaderboard.store.database); the static export writes one page per sort and
order and one per value of a filter, one filter at a time (:meth:`BoardQuery.static_name`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass
from datetime import date
from typing import Any, Callable, Mapping, Sequence

from daybreak.errors import ConfigError
from daybreak.leaderboard.ingest.submission import CONTROL_CHARACTERS, PROVENANCES

SORTS = ("rank", "model", "accelerator", "count", "framework", "date", "rules", "provenance", "runs")
ORDERS = ("asc", "desc")
CLOCK_RULES = ("dawnbench", "mlperf")
DIVISIONS = ("closed", "open")
AVAILABILITIES = ("available", "preview", "rdi")  # MLPerf's: available, preview, research/development/internal
# the filter dimensions -> their headings; the store maps each to its column (store.FACETS), the export writes a page
# per value of each
FILTERS = {"accelerator": "Accelerator", "framework": "Framework", "year": "Year", "provenance": "Provenance",
           "rules": "Rules", "division": "MLPerf division", "availability": "MLPerf availability"}
MAX_TEXT_CHARS = 100
MAX_COUNT = 1_000_000
MAX_ID = 2**31 - 1
_DIGITS = re.compile(r"^[0-9]{1,19}$", re.ASCII)
_DATE = re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})$", re.ASCII)
_UNPRINTABLE = re.compile(f"[{CONTROL_CHARACTERS}\ud800-\udfff]")  # what no stored text holds, and surrogates


class QueryError(ConfigError):
    """A board parameter with a bad value (a 400 on the web)."""


@dataclass(frozen=True)
class BoardQuery:
    accelerator: str = ""
    framework: str = ""
    min_count: int | None = None
    max_count: int | None = None
    since: date | None = None
    until: date | None = None
    year: int | None = None
    provenance: tuple[str, ...] = ()
    rules: str = ""
    division: str = ""
    availability: str = ""
    sort: str = "rank"
    order: str = "asc"
    ref: int | None = None

    def replace(self, **changes: Any) -> "BoardQuery":
        return dataclasses.replace(self, **changes)

    @property
    def ranked_order(self) -> bool:
        """Rows in the order of their rank (then adjacent rows can be compared)."""
        return self.sort == "rank" and self.order == "asc"

    def params(self) -> dict[str, str]:
        """The parameters that differ from the default, as a link writes them."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            out[f.name] = ",".join(value) if isinstance(value, tuple) else str(value)
        return out

    def filters(self) -> dict[str, str]:
        return {k: v for k, v in self.params().items() if k not in ("sort", "order", "ref")}

    def without_filters(self) -> "BoardQuery":
        return BoardQuery(sort=self.sort, order=self.order, ref=self.ref)

    def static_name(self) -> str | None:
        """The static export's page for this query, relative to the board's folder: "" for the board itself,
        ``sort-date-desc``, ``accelerator-nvidia-v100-1a2b3c4d`` (a slug and a hash of the value: a file name
        never carries a submission's text as is), ``year-2018``; None where the export writes no page (two
        filters, a filter with a sort, a reference)."""
        params = self.params()
        if not params:
            return ""
        if set(params) <= {"sort", "order"}:
            return f"sort-{self.sort}-{self.order}"
        if len(params) != 1 or len(self.provenance) > 1:
            return None
        (name, value), = params.items()
        if name not in FILTERS or not acceptable(name, value):
            return None
        return f"{name}-{slug(value) if name in ('accelerator', 'framework') else value}"


def slug(text: str) -> str:
    """A file-name part for any text: lower-case letters, digits and dashes, then 8 hex digits of its SHA-256."""
    readable = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]
    return f"{readable}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}".lstrip("-")


def parse_provenance(text: str | Sequence[str] | None) -> list[str] | None:
    """``reproduced,daybreak-run`` -> a validated list (naming the unknown one); empty -> None."""
    if not text:
        return None
    items = text.split(",") if isinstance(text, str) else list(text)
    out: list[str] = []
    for item in items:
        item = item.strip()
        if item and item not in PROVENANCES:
            raise QueryError(f"unknown provenance {item[:40]!r}; known: {', '.join(PROVENANCES)}")
        if item and item not in out:
            out.append(item)
    return out or None


def _text(name: str, text: str) -> str:
    """At most MAX_TEXT_CHARS printable characters as sent (the API's document says so: no control character even
    where trimming would drop it), then trimmed."""
    if len(text) > MAX_TEXT_CHARS or _UNPRINTABLE.search(text):
        raise QueryError(f"{name} must be at most {MAX_TEXT_CHARS} printable characters")
    return text.strip()


def _whole(name: str, text: str, lo: int, hi: int) -> int:
    if not _DIGITS.match(text) or not lo <= int(text) <= hi:
        raise QueryError(f"{name} must be a whole number from {lo} to {hi:,}")
    return int(text)


def _date(name: str, text: str) -> date:
    m = _DATE.match(text)
    try:
        if not m:
            raise ValueError
        day = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        raise QueryError(f"{name} must be a date written YYYY-MM-DD") from None
    if day.year < 1900:
        raise QueryError(f"{name} must be a date from 1900 on")
    return day


def _provenance(text: str) -> tuple[str, ...]:
    if len(text) > 200:
        raise QueryError("provenance filter too long")
    return tuple(parse_provenance(text) or ())


def _choice(name: str, text: str, choices: Sequence[str]) -> str:
    if text not in choices:
        raise QueryError(f"{name} must be one of {', '.join(choices)} (got {text[:40]!r})")
    return text


PARSERS: dict[str, Callable[[str], Any]] = {  # each parameter's reader: text -> its BoardQuery field's value
    "accelerator": lambda t: _text("accelerator", t),
    "framework": lambda t: _text("framework", t),
    "min_count": lambda t: _whole("min_count", t, 0, MAX_COUNT),
    "max_count": lambda t: _whole("max_count", t, 0, MAX_COUNT),
    "since": lambda t: _date("since", t),
    "until": lambda t: _date("until", t),
    "year": lambda t: _whole("year", t, 1900, 9999),
    "provenance": _provenance,
    "rules": lambda t: _choice("rules", t, CLOCK_RULES),
    "division": lambda t: _choice("division", t, DIVISIONS),
    "availability": lambda t: _choice("availability", t, AVAILABILITIES),
    "sort": lambda t: _choice("sort", t, SORTS),
    "order": lambda t: _choice("order", t, ORDERS),
    "ref": lambda t: _whole("ref", t, 1, MAX_ID),
}


def acceptable(name: str, value: object) -> bool:
    """Whether ``value`` is a value parameter ``name`` takes (a filter link is only made for those)."""
    try:
        PARSERS[name](str(value))
    except QueryError:
        return False
    return True


def parse_query(params: Mapping[str, str]) -> BoardQuery:
    """A board's query parameters (other names are ignored) -> a BoardQuery; a bad value is one QueryError line.
    Each parameter is judged on its own, as the API's OpenAPI document states them: filters intersect, so an empty
    range (``min_count=9&max_count=8``, ``since`` after ``until``) is a valid query that no entry matches."""
    values = {name: parse(params[name]) for name, parse in PARSERS.items() if params.get(name) not in (None, "")}
    return BoardQuery(**values)
