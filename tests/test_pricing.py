"""The price catalog (daybreak.pricing): shipped entries are complete and dated, old names still resolve, a user's
--price-file is validated with one-line errors, and a GPU price on a CPU-only run is flagged."""

import json
from datetime import date

import pytest

from daybreak.errors import ConfigError
from daybreak.pricing import (Instance, catalog, cost_usd, gpu_price_warning, load_price_file, lookup_instance,
                              price_catalog, resolve_price)

from conftest import single_line

# Every name the 2025-01-15 catalog had: runs and records name them.
OLD_NAMES = ["aws-p3.2xlarge", "aws-p3.16xlarge", "aws-p4d.24xlarge", "aws-g5.xlarge", "aws-c5.2xlarge",
             "aws-m5.large", "gcp-a2-highgpu-1g", "gcp-g2-standard-4", "gcp-n1-standard-8", "gcp-e2-standard-2",
             "azure-NC6s_v3", "azure-NC24ads_A100_v4", "azure-D2s_v5"]


def test_old_names_still_resolve():
    for name in OLD_NAMES:
        price, got, when = resolve_price(None, name)
        assert got == name and price == catalog()[name].usd_per_hour and date.fromisoformat(when)


def test_shipped_entries_are_complete_and_dated():
    items = catalog()
    for item in items.values():
        assert item.provider in ("AWS", "GCP", "Azure") and item.region
        assert item.source and item.source.startswith("https://"), item.name
        assert item.gpu_count is not None and item.vcpus and item.vcpus > 0, item.name
        assert date(2024, 1, 1) <= date.fromisoformat(item.price_date) <= date(2026, 11, 23) or \
            item.name in OLD_NAMES, item.name
        assert (item.gpu_count > 0) == (item.gpu_model is not None) == ("x" in item.hardware), item.name
        assert item.usd_per_hour > 0
    gpus = {(i.provider, i.gpu_model.split()[0]) for i in items.values() if i.gpu_model}
    for model in ("H100", "H200", "B200", "L4", "A100"):
        assert any(m == model for _, m in gpus), model
    for provider in ("AWS", "GCP", "Azure"):
        assert (provider, "H100") in gpus and any(i.provider == provider and i.gpu_count == 0 for i in items.values())
    raw = json.loads((__import__("importlib").resources.files("daybreak") / "catalog/instances.json").read_text())
    assert "check" in raw["note"].lower() and "2026-11-23" in raw["note"]


def test_cost_per_hour_and_instance_exclude_each_other(tmp_path):
    assert resolve_price(2.5, None) == (2.5, None, None)
    assert resolve_price(None, None) == (None, None, None)
    with pytest.raises(ConfigError, match="not both"):
        resolve_price(1.0, "aws-m5.large")
    with pytest.raises(ConfigError, match="finite"):
        resolve_price(float("inf"), None)
    f = _write(tmp_path, [_entry("mine")])
    with pytest.raises(ConfigError, match="--price-file, not both"):
        resolve_price(1.0, None, price_file=f)
    with pytest.raises(ConfigError, match="not in the price catalog"):
        resolve_price(None, "aws-nope")


def _entry(name, **kw):
    e = {"name": name, "provider": "lab", "region": "basement", "hardware": "1 x L4 24GB, 8 vCPU",
         "usd_per_hour": 0.42, "price_date": "2026-11-01", "gpu_model": "L4 24GB", "gpu_count": 1, "vcpus": 8}
    e.update(kw)
    return e


def _write(tmp_path, entries, name="prices.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"note": "my prices", "instances": entries}))
    return path


def test_price_file_adds_and_overrides(tmp_path):
    f = _write(tmp_path, [_entry("lab-l4"), _entry("aws-m5.large", usd_per_hour=0.05, gpu_model=None, gpu_count=0,
                                                    hardware="2 vCPU (CPU only)")])
    own = load_price_file(f)
    assert set(own) == {"lab-l4", "aws-m5.large"} and own["lab-l4"].usd_per_hour == 0.42
    assert resolve_price(None, "lab-l4", price_file=f) == (0.42, "lab-l4", "2026-11-01")
    assert resolve_price(None, "aws-m5.large", price_file=f)[0] == 0.05  # the user's entry wins
    assert resolve_price(None, "aws-m5.large")[0] == catalog()["aws-m5.large"].usd_per_hour  # shipped untouched
    assert resolve_price(None, "aws-p3.2xlarge", price_file=f)[1] == "aws-p3.2xlarge"  # shipped names still there
    assert len(price_catalog(f)) == len(catalog()) + 1
    with pytest.raises(ConfigError, match="lists 2 instances"):
        resolve_price(None, None, price_file=f)
    one = _write(tmp_path, [_entry("only")], "one.json")
    assert resolve_price(None, None, price_file=one) == (0.42, "only", "2026-11-01")
    minimal = _write(tmp_path, [{"name": "m", "provider": "p", "region": "r", "hardware": "h",
                                 "usd_per_hour": 1, "price_date": "2026-01-02"}], "minimal.json")
    assert lookup_instance("m", minimal).has_gpu is None


@pytest.mark.parametrize("content,expected", [
    (None, "no such file"),
    ("{not json", "not valid JSON (line 1"),
    ("[1, 2]", "expected a JSON object with an \"instances\" list"),
    ('{"instances": []}', "lists no instance"),
    ('{"instances": [3]}', "instances[0]: expected an object"),
    (json.dumps({"instances": [_entry("a", usd_per_hour=-1)]}), "instances[0] (a): usd_per_hour: must be a finite"),
    (json.dumps({"instances": [_entry("a", price_date="23/11/2026")]}), "price_date: must be a date YYYY-MM-DD"),
    (json.dumps({"instances": [_entry("a", usd_per_hour="cheap")]}), "usd_per_hour"),
    (json.dumps({"instances": [{"name": "a"}]}), "instances[0] (a): provider: Field required"),
    (json.dumps({"instances": [_entry("a", usd_per_hr=1)]}), "usd_per_hr: Extra inputs are not permitted"),
    (json.dumps({"instances": [_entry("a", gpu_model=None)]}), "gpu_count is 1 but gpu_model is not given"),
    (json.dumps({"instances": [_entry("a"), _entry("a")]}), "instances[1] (a): instance 'a' is listed twice"),
    (json.dumps({"instances": [_entry("a b")]}), "name: must be a non-empty name without spaces"),
])
def test_bad_price_files_are_one_line_errors(tmp_path, content, expected):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as err:
        load_price_file(path)
    msg = str(err.value)
    assert single_line(msg) and msg.startswith(f"--price-file {path}: ") and expected in msg, msg


def test_gpu_price_on_a_cpu_only_run_is_flagged():
    p5 = catalog()["aws-p5.48xlarge"]
    warn = gpu_price_warning(p5, system_has_gpu=False)
    assert warn and single_line(warn) and "aws-p5.48xlarge" in warn and "8 x H100" in warn and "no GPU" in warn
    assert gpu_price_warning(p5, system_has_gpu=True) is None
    cpu = catalog()["aws-c7i.2xlarge"]
    assert gpu_price_warning(cpu, system_has_gpu=False) is None
    assert "leaves the GPU out" in gpu_price_warning(cpu, system_has_gpu=True)
    unknown = Instance(name="x", provider="p", region="r", hardware="h", usd_per_hour=1.0, price_date="2026-01-01")
    assert gpu_price_warning(unknown, system_has_gpu=False) is None


def test_cost_usd():
    assert cost_usd(1800.0, 3.0) == pytest.approx(1.5)
    assert cost_usd(None, 3.0) is None and cost_usd(10.0, None) is None
