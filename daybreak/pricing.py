"""The shipped price catalog (catalog/instances.json), a user's own catalog (``--price-file``), and how a run's
price per hour is chosen.

A catalog is a JSON object ``{"note": ..., "instances": [entry, ...]}``; an entry is::

    {"name": "aws-p5.48xlarge", "provider": "AWS", "region": "us-east-1",
     "hardware": "8 x H100 80GB SXM, 192 vCPU", "usd_per_hour": 55.04, "price_date": "2025-06-01",
     "gpu_model": "H100 80GB SXM", "gpu_count": 8, "vcpus": 192,
     "source": "https://aws.amazon.com/ec2/pricing/on-demand/", "note": "..."}

name, provider, region, hardware, usd_per_hour (finite, >= 0) and price_date (YYYY-MM-DD) are required; gpu_model,
gpu_count (0 = CPU only), vcpus, source and note are optional in a user's file (the shipped catalog has them all).
"""

from __future__ import annotations

import json
import math
from datetime import date
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from daybreak.errors import ConfigError


class Instance(BaseModel):
    """One priced machine. ``gpu_count`` None = not stated (a user's file); 0 = CPU only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    provider: str
    region: str
    hardware: str
    usd_per_hour: float
    price_date: str
    gpu_model: str | None = None
    gpu_count: int | None = None
    vcpus: int | None = None
    source: str | None = None
    note: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip() or any(c.isspace() for c in v):
            raise ValueError("must be a non-empty name without spaces")
        return v

    @field_validator("usd_per_hour")
    @classmethod
    def _price(cls, v: float) -> float:
        if not (math.isfinite(v) and v >= 0):
            raise ValueError("must be a finite number >= 0")
        return v

    @field_validator("price_date")
    @classmethod
    def _date(cls, v: str) -> str:
        try:
            date.fromisoformat(v)
        except ValueError:
            raise ValueError("must be a date YYYY-MM-DD") from None
        if len(v) != 10:
            raise ValueError("must be a date YYYY-MM-DD")
        return v

    @field_validator("gpu_count", "vcpus")
    @classmethod
    def _count(cls, v: int | None) -> int | None:
        if v is not None and v < 0:
            raise ValueError("must be >= 0")
        return v

    @model_validator(mode="after")
    def _gpus(self) -> "Instance":
        if self.gpu_count and not self.gpu_model:
            raise ValueError(f"gpu_count is {self.gpu_count} but gpu_model is not given")
        if self.gpu_model and self.gpu_count == 0:
            raise ValueError(f"gpu_model is {self.gpu_model!r} but gpu_count is 0")
        return self

    @property
    def has_gpu(self) -> bool | None:
        """True/False when the entry says; None when it does not (neither gpu_count nor gpu_model given)."""
        if self.gpu_count is not None:
            return self.gpu_count > 0
        return True if self.gpu_model else None


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = [str(p) for p in first.get("loc", ())]
    where = ".".join(loc) or "entry"
    msg = first.get("msg", "invalid").removeprefix("Value error, ")
    return f"{where}: {msg}".replace("\n", " ")


def _parse(data: Any, origin: str) -> dict[str, Instance]:
    if not isinstance(data, Mapping) or not isinstance(data.get("instances"), list):
        raise ConfigError(f"{origin}: expected a JSON object with an \"instances\" list (the schema of "
                          f"daybreak's catalog/instances.json)")
    out: dict[str, Instance] = {}
    for i, item in enumerate(data["instances"]):
        label = f"instances[{i}]" + (f" ({item['name']})" if isinstance(item, Mapping) and
                                     isinstance(item.get("name"), str) else "")
        if not isinstance(item, Mapping):
            raise ConfigError(f"{origin}: {label}: expected an object")
        try:
            entry = Instance.model_validate(dict(item))
        except ValidationError as err:
            raise ConfigError(f"{origin}: {label}: {_first_error(err)}") from None
        if entry.name in out:
            raise ConfigError(f"{origin}: {label}: instance {entry.name!r} is listed twice")
        out[entry.name] = entry
    if not out:
        raise ConfigError(f"{origin}: lists no instance")
    return out


@lru_cache(maxsize=1)
def catalog() -> dict[str, Instance]:
    """The shipped catalog, name -> entry."""
    text = resources.files("daybreak").joinpath("catalog/instances.json").read_text(encoding="utf-8")
    return _parse(json.loads(text), "catalog/instances.json")


def catalog_note() -> str:
    """The shipped catalog's own note (where the prices come from and how far to trust them)."""
    text = resources.files("daybreak").joinpath("catalog/instances.json").read_text(encoding="utf-8")
    return str(json.loads(text).get("note", ""))


def load_price_file(path: str | Path) -> dict[str, Instance]:
    """A user's catalog (``--price-file``) in the shipped catalog's schema, validated. Every problem is a
    ConfigError with a one-line message naming the file and the entry."""
    origin = f"--price-file {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{origin}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{origin}: cannot read it ({getattr(err, 'strerror', None) or err})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{origin}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from None
    return _parse(data, origin)


def price_catalog(price_file: str | Path | None = None) -> dict[str, Instance]:
    """The shipped catalog, with a user's entries added (a user's entry replaces a shipped one of the same name)."""
    merged = dict(catalog())
    if price_file is not None:
        merged.update(load_price_file(price_file))
    return merged


def lookup_instance(instance: str, price_file: str | Path | None = None) -> Instance:
    """The entry named ``instance`` (a user's file first, then the shipped catalog)."""
    known = price_catalog(price_file)
    if instance not in known:
        where = f"the price catalog or --price-file {price_file}" if price_file is not None else "the price catalog"
        raise ConfigError(f"--instance {instance!r} is not in {where}; see `daybreak instances`")
    return known[instance]


def resolve_price(cost_per_hour: float | None, instance: str | None,
                  price_file: str | Path | None = None) -> tuple[float | None, str | None, str | None]:
    """Returns (usd_per_hour, instance name, price date). ``--cost-per-hour`` excludes ``--instance`` and
    ``--price-file``. ``--instance`` is looked up in ``price_file`` first, then the shipped catalog; a
    ``price_file`` without ``--instance`` must list exactly one instance, which is used."""
    if cost_per_hour is not None and instance is not None:
        raise ConfigError("give --cost-per-hour or --instance, not both")
    if cost_per_hour is not None and price_file is not None:
        raise ConfigError("give --cost-per-hour or --price-file, not both")
    if cost_per_hour is not None:
        if not cost_per_hour >= 0 or cost_per_hour == float("inf"):
            raise ConfigError(f"--cost-per-hour {cost_per_hour}: must be a finite number >= 0")
        return cost_per_hour, None, None
    if instance is None and price_file is not None:
        own = load_price_file(price_file)
        if len(own) != 1:
            raise ConfigError(f"--price-file {price_file} lists {len(own)} instances ({', '.join(own)}): "
                              f"choose one with --instance")
        instance = next(iter(own))
    if instance is not None:
        item = lookup_instance(instance, price_file)
        return item.usd_per_hour, item.name, item.price_date
    return None, None, None


def gpu_price_warning(instance_entry: Instance, system_has_gpu: bool) -> str | None:
    """A one-line warning when the priced machine and the run disagree: a GPU instance's price on a run that used
    no GPU (the cost is that of hardware the run did not use), or a CPU-only instance's price on a GPU run (the
    cost leaves out the GPU). None when they agree or the entry does not say whether it has GPUs."""
    has_gpu = instance_entry.has_gpu
    if has_gpu is None:
        return None
    if has_gpu and not system_has_gpu:
        gpus = f"{instance_entry.gpu_count} x {instance_entry.gpu_model}" if instance_entry.gpu_count else \
            str(instance_entry.gpu_model)
        return (f"the price of {instance_entry.name} ({gpus}, {instance_entry.usd_per_hour:g} USD/hour) is applied "
                f"to a run that used no GPU: the cost is that of GPUs this run did not use")
    if not has_gpu and system_has_gpu:
        return (f"the price of {instance_entry.name} (CPU only, {instance_entry.usd_per_hour:g} USD/hour) is "
                f"applied to a run on a GPU: the cost leaves the GPU out")
    return None


def cost_usd(seconds: float | None, usd_per_hour: float | None) -> float | None:
    if seconds is None or usd_per_hour is None:
        return None
    return seconds / 3600.0 * usd_per_hour
