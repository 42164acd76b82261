"""Energy counters (daybreak.measure.energy) on fake powercap trees and a fake NVML, and on this machine.

Expected joules are computed here from the counter values the test writes (plain arithmetic), never by the module.
"""

import json
import os
import time
from pathlib import Path

import pytest

import daybreak.measure.energy as energy
from daybreak.measure.energy import (EnergyMeter, EnergySnapshot, combine_ranks, combine_snapshots, delta,
                                     energy_by_phase, energy_for_clock, sample_idle_power, sum_deltas)
from daybreak.rules import DAWNBENCH, MLPERF, Interval, clock_segments, read_clock

RANGE_UJ = 262_143_328_850  # a typical package zone's max_energy_range_uj


# --- fakes -------------------------------------------------------------------------------------------------------

class Tree:
    """A fake /sys/class/powercap: flat zone folders, as the real class folder shows them."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def zone(self, zone_id: str, name: str, uj: int, range_uj: int = RANGE_UJ) -> "Tree":
        d = self.root / zone_id
        d.mkdir(exist_ok=True)
        (d / "name").write_text(name + "\n")
        (d / "max_energy_range_uj").write_text(f"{range_uj}\n")
        self.set(zone_id, uj)
        return self

    def set(self, zone_id: str, uj: int) -> None:
        (self.root / zone_id / "energy_uj").write_text(f"{uj}\n")


class FakeNvml:
    def __init__(self, path: Path, gpus: list[dict]):
        self.path = path
        self.gpus = gpus
        self.write()

    def write(self) -> None:
        self.path.write_text(json.dumps({"gpus": self.gpus}))

    def set(self, index: int, mj: int | None) -> None:
        self.gpus[index]["energy_mj"] = mj
        self.write()


def gpu(index: int, mj: int | None, uuid: str | None = None, name: str = "NVIDIA H100 80GB HBM3", **extra) -> dict:
    return {"index": index, "name": name, "uuid": uuid or f"GPU-{index:08d}-0000-0000-0000-000000000000",
            "energy_mj": mj, **extra}


@pytest.fixture(autouse=True)
def _no_real_counters(monkeypatch, tmp_path):
    """Tests say which tree and which NVML they read; nothing leaks in from the environment."""
    monkeypatch.delenv(energy.FAKE_NVML_ENV, raising=False)
    monkeypatch.setenv(energy.POWERCAP_ROOT_ENV, str(tmp_path / "no-powercap-here"))


def meter(**kw) -> EnergyMeter:
    kw.setdefault("poll_s", None)
    kw.setdefault("host", "node1")
    return EnergyMeter(**kw)


# --- powercap ----------------------------------------------------------------------------------------------------

def test_package_and_dram_joules_between_reads(tmp_path):
    tree = Tree(tmp_path / "powercap").zone("intel-rapl:0", "package-0", 5_000_000_000)
    tree.zone("intel-rapl:0:0", "dram", 1_000_000_000).zone("intel-rapl:0:1", "core", 3_000_000_000)
    tree.zone("intel-rapl:1", "package-1", 7_000_000_000).zone("intel-rapl:1:0", "dram", 2_000_000_000)
    with meter(powercap_root=tree.root, gpus=()) as m:
        a = m.read(t_s=1.0)
        tree.set("intel-rapl:0", 5_000_000_000 + 120_500_000)  # +120.5 J
        tree.set("intel-rapl:0:0", 1_000_000_000 + 10_250_000)  # +10.25 J
        tree.set("intel-rapl:0:1", 3_000_000_000 + 90_000_000)  # +90 J (part of the package: not added again)
        tree.set("intel-rapl:1", 7_000_000_000 + 80_000_000)  # +80 J
        tree.set("intel-rapl:1:0", 2_000_000_000 + 4_000_000)  # +4 J
        b = m.read(t_s=3.0)
    d = delta(a, b)
    assert d.seconds == 2.0
    per = {s.source: s.joules for s in d.sources}
    assert per == pytest.approx({"intel-rapl:0": 120.5, "intel-rapl:0:0": 10.25, "intel-rapl:0:1": 90.0,
                                 "intel-rapl:1": 80.0, "intel-rapl:1:0": 4.0})
    labels = {s.source: (s.kind, s.label) for s in d.sources}
    assert labels["intel-rapl:0:0"] == ("dram", "package-0/dram") and labels["intel-rapl:0:1"][0] == "core"
    assert d.cpu_package_j == pytest.approx(200.5) and d.dram_j == pytest.approx(14.25)
    assert d.total_j == pytest.approx(214.75) and d.total_covers == ["cpu_package", "dram"]
    assert d.gpu_j is None and "no GPU selected" in d.unavailable["gpu"]
    assert d.watts()["intel-rapl:0"] == pytest.approx(60.25)


def test_nested_layout_reads_the_same_zones(tmp_path):
    root = tmp_path / "virtual"
    Tree(root / "intel-rapl").zone("intel-rapl:0", "package-0", 10)
    Tree(root / "intel-rapl" / "intel-rapl:0").zone("intel-rapl:0:0", "dram", 20)
    with meter(powercap_root=root, gpus=()) as m:
        assert sorted((c["source"], c["kind"]) for c in m.describe()["counters"]) == [
            ("intel-rapl:0", "cpu_package"), ("intel-rapl:0:0", "dram")]


def test_wrap_around_uses_max_energy_range(tmp_path):
    tree = Tree(tmp_path / "powercap").zone("intel-rapl:0", "package-0", RANGE_UJ - 1_000_000)  # 1 J below the top
    with meter(powercap_root=tree.root, gpus=()) as m:
        a = m.read()
        tree.set("intel-rapl:0", 2_500_000)  # wrapped, then 2.5 J more
        b = m.read()
        tree.set("intel-rapl:0", 7_500_000)
        c = m.read()
    assert delta(a, b).cpu_package_j == pytest.approx(3.5)
    assert delta(b, c).cpu_package_j == pytest.approx(5.0)
    assert delta(a, c).cpu_package_j == pytest.approx(8.5)
    assert b.reading("intel-rapl:0").raw == 2_500_000 and b.reading("intel-rapl:0").range_j == pytest.approx(
        RANGE_UJ / 1e6)


def test_polling_catches_several_wraps_between_two_reads(tmp_path):
    """A phase longer than the wrap period: the poller's reads keep every wrap."""
    rng = 1_000_000_000  # 1000 J
    tree = Tree(tmp_path / "powercap").zone("intel-rapl:0", "package-0", 0, range_uj=rng)
    m = meter(powercap_root=tree.root, gpus=(), poll_s=0.005)
    try:
        a = m.read()
        key = a.reading("intel-rapl:0").key

        def polled(value: int) -> None:
            tree.set("intel-rapl:0", value)
            deadline = time.monotonic() + 10
            while m._state[key].last_raw != value:
                assert time.monotonic() < deadline, "the poller never read the counter"
                time.sleep(0.002)

        for value in (600_000_000, 100_000_000, 700_000_000, 200_000_000):  # wraps twice
            polled(value)
        b = m.read()
    finally:
        m.close()
    assert delta(a, b).cpu_package_j == pytest.approx(2 * 1000 + 200)


def test_unreadable_energy_file_is_unavailable_with_the_reason(tmp_path, monkeypatch):
    tree = Tree(tmp_path / "powercap").zone("intel-rapl:0", "package-0", 1_000).zone("intel-rapl:0:0", "dram", 5)
    locked = tree.root / "intel-rapl:0" / "energy_uj"
    locked.chmod(0o200)  # what Linux >= 5.10 does (0400 root); root ignores modes, so also refuse it here
    real = energy._read_text

    def read_text(path):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(energy, "_read_text", read_text)
    with meter(powercap_root=tree.root, gpus=()) as m:
        a = m.read()
        tree.set("intel-rapl:0:0", 2_000_005)
        b = m.read()
    r = a.reading("intel-rapl:0")
    assert r.joules is None and f"{locked} is not readable (permission denied" in r.unavailable
    assert "root only since Linux 5.10" in r.unavailable
    d = delta(a, b)
    assert d.cpu_package_j is None and str(locked) in d.unavailable["cpu_package"]
    assert d.dram_j == pytest.approx(2.0) and d.total_covers == ["dram"]  # what is readable is still reported


def test_no_counters_at_all_is_unavailable_with_reasons(tmp_path):
    fake = tmp_path / "nvml.json"
    fake.write_text(json.dumps({"init_error": "Driver Not Loaded", "gpus": []}))
    with meter(powercap_root=tmp_path / "absent", fake_nvml=fake) as m:
        a = m.read()
        b = m.read()
        assert not m.available
    d = delta(a, b)
    assert d.total_j is None and d.total_covers == [] and d.sources == []
    assert "Driver Not Loaded" in d.unavailable["gpu"]
    assert f"{tmp_path / 'absent'} does not exist" in d.unavailable["cpu_package"]
    assert set(d.unavailable) == {"gpu", "cpu_package", "dram"} and all(d.unavailable.values())


def test_powercap_without_zones_or_dram(tmp_path):
    (tmp_path / "empty").mkdir()
    with meter(powercap_root=tmp_path / "empty", gpus=()) as m:
        assert "no intel-rapl zone" in m.missing["cpu_package"]
    tree = Tree(tmp_path / "amd").zone("intel-rapl:0", "package-0", 0).zone("intel-rapl:0:0", "core", 0)
    with meter(powercap_root=tree.root, gpus=()) as m:
        a = m.read()
        tree.set("intel-rapl:0", 9_000_000)
        d = delta(a, m.read())
    assert d.cpu_package_j == pytest.approx(9.0) and d.dram_j is None and "no dram zone" in d.unavailable["dram"]
    assert d.total_covers == ["cpu_package"]


# --- NVML (fake) -------------------------------------------------------------------------------------------------

def test_fake_nvml_two_gpus_per_device_and_total(tmp_path, monkeypatch):
    nv = FakeNvml(tmp_path / "nvml.json", [gpu(0, 1_000_000), gpu(1, 2_000_000)])
    monkeypatch.setenv(energy.FAKE_NVML_ENV, str(nv.path))  # the environment variable, as a user would set it
    with meter() as m:
        a = m.read(t_s=0.0)
        nv.set(0, 1_000_000 + 350_000)  # +350 J
        nv.set(1, 2_000_000 + 410_500)  # +410.5 J
        b = m.read(t_s=1.0)
        assert m.describe()["gpu_backend"] == f"fake NVML {nv.path}"
    d = delta(a, b)
    per = {s.source: (s.joules, s.label, s.key) for s in d.sources}
    assert per["gpu0"][0] == pytest.approx(350.0) and per["gpu1"][0] == pytest.approx(410.5)
    assert per["gpu0"][1] == "NVIDIA H100 80GB HBM3" and per["gpu1"][2] == "gpu:" + nv.gpus[1]["uuid"]
    assert d.gpu_j == pytest.approx(760.5) and d.total_j == pytest.approx(760.5) and d.total_covers == ["gpu"]
    assert "does not exist" in d.unavailable["cpu_package"]
    assert a.reading("gpu0").unit == "mJ" and b.reading("gpu0").raw == 1_350_000


def test_gpu_selection_and_a_gpu_without_the_counter(tmp_path):
    nv = FakeNvml(tmp_path / "nvml.json", [gpu(0, 5_000), gpu(1, None, name="Tesla P100-PCIE-16GB",
                                                                  error="Not Supported")])
    with meter(fake_nvml=nv.path) as m:
        a = m.read()
        nv.set(0, 15_000)
        d = delta(a, m.read())
    assert d.sources[0].joules == pytest.approx(10.0)
    assert d.sources[1].joules is None and "Tesla P100" in d.sources[1].unavailable
    assert "needs a Volta or newer GPU" in d.sources[1].unavailable
    assert d.gpu_j is None and "gpu1" in d.unavailable["gpu"]  # a total over some GPUs only is not a GPU total
    with meter(fake_nvml=nv.path, gpus=[nv.gpus[0]["uuid"]]) as m:  # a rank meters its own GPU, by UUID
        a = m.read()
        nv.set(0, 20_000)
        d = delta(a, m.read())
    assert [s.source for s in d.sources] == ["gpu0"] and d.gpu_j == pytest.approx(5.0)
    with meter(fake_nvml=nv.path, gpus=[7]) as m:
        assert "no GPU 7" in m.missing["gpu"]


def test_nvml_counter_going_back_is_not_an_interval(tmp_path):
    nv = FakeNvml(tmp_path / "nvml.json", [gpu(0, 900_000)])
    with meter(fake_nvml=nv.path) as m:
        a = m.read()
        nv.set(0, 100)  # driver reloaded: the counter restarted
        b = m.read()
        nv.set(0, 5_100)
        c = m.read()
    assert delta(a, b).gpu_j is None and "reset" in delta(a, c).unavailable["gpu"]
    assert delta(b, c).gpu_j == pytest.approx(5.0)


def test_pynvml_missing_is_a_reason(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    with meter() as m:
        assert "nvidia-ml-py package is not installed" in m.missing["gpu"]
        assert "daybreak[energy]" in m.missing["gpu"]


# --- ranks -------------------------------------------------------------------------------------------------------

def test_two_ranks_share_one_cpu_package_counted_once(tmp_path):
    tree = Tree(tmp_path / "powercap").zone("intel-rapl:0", "package-0", 0).zone("intel-rapl:0:0", "dram", 0)
    nv0 = FakeNvml(tmp_path / "rank0.json", [gpu(0, 0)])
    nv1 = FakeNvml(tmp_path / "rank1.json", [gpu(1, 0)])  # the node's other GPU: another UUID
    m0 = meter(powercap_root=tree.root, fake_nvml=nv0.path, rank=0)
    m1 = meter(powercap_root=tree.root, fake_nvml=nv1.path, rank=1)
    a0, a1 = m0.read(0.0), m1.read(0.0)
    tree.set("intel-rapl:0", 150_000_000)  # 150 J for the whole socket
    tree.set("intel-rapl:0:0", 20_000_000)
    nv0.set(0, 300_000)
    nv1.set(0, 280_000)
    b0, b1 = m0.read(2.0), m1.read(2.0)
    m0.close()
    m1.close()
    d0, d1 = delta(a0, b0), delta(a1, b1)
    assert d0.cpu_package_j == pytest.approx(150.0) and d1.cpu_package_j == pytest.approx(150.0)  # each sees it all
    total = combine_ranks([d0, d1])
    assert total.gpu_j == pytest.approx(580.0)
    assert total.cpu_package_j == pytest.approx(150.0) and total.dram_j == pytest.approx(20.0)
    assert total.total_j == pytest.approx(750.0)
    assert sorted((s.source, s.rank) for s in total.sources if s.kind == "gpu") == [("gpu0", 0), ("gpu1", 1)]
    assert any("counted once" in n for n in total.notes)
    # the same from snapshots combined at each boundary
    both = delta(combine_snapshots([a0, a1]), combine_snapshots([b0, b1]))
    assert both.total_j == pytest.approx(750.0) and both.cpu_package_j == pytest.approx(150.0)


def test_ranks_on_two_nodes_add_their_packages(tmp_path):
    parts = []
    for node in ("node1", "node2"):
        tree = Tree(tmp_path / node).zone("intel-rapl:0", "package-0", 0)
        with meter(powercap_root=tree.root, gpus=(), host=node) as m:
            a = m.read()
            tree.set("intel-rapl:0", 40_000_000)
            parts.append(delta(a, m.read()))
    assert combine_ranks(parts).cpu_package_j == pytest.approx(80.0)


def test_a_rank_without_its_gpu_makes_the_gpu_total_partial(tmp_path):
    nv = FakeNvml(tmp_path / "nvml.json", [gpu(0, 0)])
    with meter(fake_nvml=nv.path, rank=0) as m:
        a = m.read()
        nv.set(0, 1_000)
        d0 = delta(a, m.read())
    with meter(fake_nvml=tmp_path / "missing.json", rank=1) as m:
        d1 = delta(m.read(), m.read())
    total = combine_ranks([d0, d1])
    assert total.gpu_j is None and total.unavailable["gpu"].startswith("partial: rank 1:")
    assert total.sources[0].joules == pytest.approx(1.0)


# --- phases and clock rule sets ----------------------------------------------------------------------------------

POWER = {"model_init": 50.0, "warmup": 200.0, "data_load": 80.0, "train": 300.0, "eval": 150.0, "record": 60.0}
TIMELINE = [Interval("model_init", 0.0, 2.0), Interval("warmup", 2.0, 7.0), Interval("data_load", 7.0, 8.0),
            Interval("train", 8.0, 18.0), Interval("eval", 18.0, 20.0), Interval("record", 20.0, 20.5),
            Interval("train", 20.5, 30.5), Interval("eval", 30.5, 32.5)]


def _run(tmp_path):
    """A run on a fake node: the package draws POWER[phase] watts; the meter is read at every boundary."""
    tree = Tree(tmp_path / "powercap").zone("intel-rapl:0", "package-0", 0)
    m = meter(powercap_root=tree.root, gpus=())
    uj = 0
    snaps = {0.0: m.read(0.0)}
    pairs = []
    for i in TIMELINE:
        start = snaps[i.start_s]
        uj += round(POWER[i.phase] * (i.end_s - i.start_s) * 1e6)
        tree.set("intel-rapl:0", uj)
        snaps[i.end_s] = m.read(i.end_s)
        pairs.append((i.phase, start, snaps[i.end_s]))
    m.close()
    return list(snaps.values()), pairs


def joules(phases=None, lo=0.0, hi=1e9):
    """Independent arithmetic: watts x seconds of the given phases within [lo, hi]."""
    return sum(POWER[i.phase] * i.overlap(lo, hi) for i in TIMELINE if phases is None or i.phase in phases)


def test_joules_per_phase(tmp_path):
    _, pairs = _run(tmp_path)
    per = energy_by_phase(pairs)
    assert list(per) == ["model_init", "warmup", "data_load", "train", "eval", "record"]
    for phase, d in per.items():
        assert d.cpu_package_j == pytest.approx(joules({phase})), phase
    assert per["train"].seconds == pytest.approx(20.0) and per["eval"].cpu_package_j == pytest.approx(600.0)


def test_excluded_phases_are_not_summed(tmp_path):
    snaps, pairs = _run(tmp_path)
    # exactly the clock's stretches, for both rule sets, at the end of the second evaluation
    at = 32.5
    dawn = energy_for_clock(DAWNBENCH, TIMELINE, snaps, at)
    assert dawn.seconds == pytest.approx(read_clock(DAWNBENCH, TIMELINE, at).seconds)
    assert dawn.energy.cpu_package_j == pytest.approx(joules({"model_init", "warmup", "data_load", "train"}))
    assert dawn.segments == [(0.0, 18.0), (20.5, 30.5)]
    ml = energy_for_clock(MLPERF, TIMELINE, snaps, at)  # starts when data is first touched; never pauses
    assert ml.start_s == 7.0 and ml.seconds == pytest.approx(read_clock(MLPERF, TIMELINE, at).seconds)
    assert ml.energy.cpu_package_j == pytest.approx(joules(lo=7.0, hi=at))
    assert ml.energy.cpu_package_j > dawn.energy.cpu_package_j - joules({"model_init", "warmup"})


def test_clock_segments_are_the_clock_less_the_excluded_phases():
    gap = [Interval("train", 0.0, 4.0), Interval("eval", 4.5, 5.0), Interval("train", 5.2, 9.0)]  # gaps between
    # the gaps between phases count (they are neither evaluation nor a record write); MLPerf never pauses
    assert clock_segments(DAWNBENCH, gap, 4.7) == [(0.0, 4.5)]
    assert clock_segments(DAWNBENCH, gap, 9.0) == [(0.0, 4.5), (5.0, 9.0)]
    assert clock_segments(MLPERF, gap, 9.0) == [(0.0, 9.0)]
    assert read_clock(DAWNBENCH, gap, 9.0).seconds == pytest.approx(8.5)
    # an excluded phase inside another (a checkpoint written during an evaluation) is taken out once
    nested = [Interval("train", 0.0, 10.0), Interval("eval", 10.0, 14.0), Interval("record", 11.0, 12.0),
              Interval("train", 14.0, 20.0)]
    assert clock_segments(DAWNBENCH, nested, 20.0) == [(0.0, 10.0), (14.0, 20.0)]
    reading = read_clock(DAWNBENCH, nested, 20.0)
    assert reading.seconds == pytest.approx(16.0) and reading.excluded_s == {"eval": 4.0, "record": 1.0}


def test_an_instant_between_reads_is_interpolated_and_said_so(tmp_path):
    snaps, _ = _run(tmp_path)
    at = 12.0  # inside the first training interval: no read there
    clock = energy_for_clock(DAWNBENCH, TIMELINE, snaps, at)
    assert clock.energy.cpu_package_j == pytest.approx(joules(lo=0.0, hi=at))
    assert any("interpolated" in n for n in clock.energy.notes)
    late = energy_for_clock(DAWNBENCH, TIMELINE, snaps, 40.0)  # after the last read: unavailable, not extrapolated
    assert late.energy.cpu_package_j is None and "no energy reading" in late.energy.unavailable["cpu_package"]


def test_sum_of_intervals_and_json_round_trip(tmp_path):
    snaps, pairs = _run(tmp_path)
    whole = sum_deltas(delta(s, e) for _, s, e in pairs)
    assert whole.cpu_package_j == pytest.approx(joules()) and whole.seconds == pytest.approx(32.5)
    again = EnergySnapshot.model_validate_json(snaps[3].model_dump_json())
    assert again == snaps[3]
    assert delta(snaps[0], again).cpu_package_j == pytest.approx(delta(snaps[0], snaps[3]).cpu_package_j)


# --- idle power --------------------------------------------------------------------------------------------------

def test_idle_power_per_source(tmp_path):
    tree = Tree(tmp_path / "powercap").zone("intel-rapl:0", "package-0", 0).zone("intel-rapl:0:0", "dram", 0)
    nv = FakeNvml(tmp_path / "nvml.json", [gpu(0, 0), gpu(1, 0)])
    m = meter(powercap_root=tree.root, fake_nvml=nv.path)
    m.read()

    def idle(seconds):  # what the hardware would have counted while we slept
        start = time.perf_counter()
        tree.set("intel-rapl:0", 40_000_000)  # 40 J
        tree.set("intel-rapl:0:0", 6_000_000)
        nv.set(0, 60_000)  # 60 J
        nv.set(1, 66_000)
        while time.perf_counter() - start < seconds:
            time.sleep(0.01)

    p = sample_idle_power(0.2, meter=m, sleep=idle)
    m.close()
    s = p.seconds
    assert s >= 0.2
    assert p.per_source_w["gpu0"] == pytest.approx(60.0 / s) and p.gpu_w == pytest.approx(126.0 / s)
    assert p.cpu_package_w == pytest.approx(40.0 / s) and p.dram_w == pytest.approx(6.0 / s)
    assert p.total_w == pytest.approx(172.0 / s) and p.total_covers == ["gpu", "cpu_package", "dram"]
    with pytest.raises(ValueError):
        sample_idle_power(0)


# --- this machine ------------------------------------------------------------------------------------------------

def test_this_machine_reads_or_says_why_not(monkeypatch):
    """No fakes: real NVML (if installed) and the real powercap tree. Whatever this machine has, every kind is
    either measured or unavailable with a reason, and nothing crashes."""
    monkeypatch.delenv(energy.POWERCAP_ROOT_ENV, raising=False)
    with EnergyMeter(poll_s=None) as m:
        a = m.read()
        time.sleep(0.05)
        b = m.read()
        info = m.describe()
    d = delta(a, b)
    assert info["powercap_root"] == energy.DEFAULT_POWERCAP_ROOT
    for kind in energy.TOTAL_KINDS:
        if d.kind_j(kind) is None:
            assert isinstance(d.unavailable[kind], str) and len(d.unavailable[kind]) > 10, kind
        else:
            assert d.kind_j(kind) >= 0 and kind in d.total_covers
    for s in d.sources:
        assert (s.joules is None) == (s.unavailable is not None)
    if not os.path.isdir(energy.DEFAULT_POWERCAP_ROOT):
        assert "does not exist" in d.unavailable["cpu_package"]


# --- the real NVML code path, against a stand-in pynvml module -----------------------------------------------------

def test_nvml_code_path_with_a_stub_module(monkeypatch):
    import sys
    import types

    class NVMLError(Exception):
        def __init__(self, value):
            self.value = value

        def __str__(self):
            return {3: "Not Supported", 999: "Unknown Error"}[self.value]

    counters = {0: 10_000, 1: None}
    stub = types.SimpleNamespace(
        NVMLError=NVMLError, NVML_ERROR_NOT_SUPPORTED=3, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: 2, nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: [b"NVIDIA A100-SXM4-80GB", "Tesla P100-PCIE-16GB"][h],  # old bindings: bytes
        nvmlDeviceGetUUID=lambda h: f"GPU-{h}")

    def energy_mj(h):
        if counters[h] is None:
            raise NVMLError(3)
        return counters[h]

    stub.nvmlDeviceGetTotalEnergyConsumption = energy_mj
    monkeypatch.setitem(sys.modules, "pynvml", stub)
    with meter() as m:
        a = m.read()
        counters[0] = 12_500
        d = delta(a, m.read())
        assert m.describe()["gpu_backend"] == "nvml"
    assert d.sources[0].label == "NVIDIA A100-SXM4-80GB" and d.sources[0].joules == pytest.approx(2.5)
    assert d.sources[0].key == "gpu:GPU-0"
    assert "Tesla P100" in d.sources[1].unavailable and "Volta or newer" in d.sources[1].unavailable

    def broken_init():
        raise NVMLError(999)

    stub.nvmlInit = broken_init
    with meter() as m:
        assert m.missing["gpu"].startswith("nvml: cannot initialize NVML (Unknown Error)")


def test_reads_too_far_apart_for_a_fast_wrapping_counter_are_noted(tmp_path):
    tree = Tree(tmp_path / "powercap").zone("intel-rapl:0", "package-0", 0, range_uj=1_000_000)  # wraps every 1 J
    with meter(powercap_root=tree.root, gpus=()) as m:
        a = m.read()
        time.sleep(0.01)  # > 1 J / MAX_ZONE_W
        tree.set("intel-rapl:0", 500_000)
        d = delta(a, m.read())
    assert d.cpu_package_j == pytest.approx(0.5) and any("may have been missed" in n for n in d.notes)


def test_torch_gpu_uuid_without_cuda_is_none():
    import torch

    if not torch.cuda.is_available():
        assert energy.torch_gpu_uuid(0) is None
