"""The shipped price catalog (catalog/instances.json) and how a run's price per hour is chosen."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from daybreak.errors import ConfigError


@dataclass(frozen=True)
class Instance:
    name: str
    provider: str
    region: str
    hardware: str
    usd_per_hour: float
    price_date: str


@lru_cache(maxsize=1)
def catalog() -> dict[str, Instance]:
    text = resources.files("daybreak").joinpath("catalog/instances.json").read_text(encoding="utf-8")
    return {item["name"]: Instance(**item) for item in json.loads(text)["instances"]}


def resolve_price(cost_per_hour: float | None, instance: str | None) -> tuple[float | None, str | None, str | None]:
    """Returns (usd_per_hour, instance name, price date). ``--cost-per-hour`` and ``--instance`` exclude each other."""
    if cost_per_hour is not None and instance is not None:
        raise ConfigError("give --cost-per-hour or --instance, not both")
    if cost_per_hour is not None:
        if not cost_per_hour >= 0 or cost_per_hour == float("inf"):
            raise ConfigError(f"--cost-per-hour {cost_per_hour}: must be a finite number >= 0")
        return cost_per_hour, None, None
    if instance is not None:
        known = catalog()
        if instance not in known:
            raise ConfigError(f"--instance {instance!r} is not in the price catalog; see `daybreak instances`")
        item = known[instance]
        return item.usd_per_hour, item.name, item.price_date
    return None, None, None


def cost_usd(seconds: float | None, usd_per_hour: float | None) -> float | None:
    if seconds is None or usd_per_hour is None:
        return None
    return seconds / 3600.0 * usd_per_hour
