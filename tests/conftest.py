import os
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Tests moved out of the default suite (which must stay well under 5 minutes on 2 cores) because a faster test
# covers the same code; `pytest -m slow` (CI runs it) still runs them. Test id -> the faster test that covers it.
SLOW_DUPLICATES = {
    "tests/test_crash_safety.py::test_sigkill_leaves_parseable_files[training-1.1]":
        "the same kill during training at 0.0 s and 0.37 s",
    "tests/test_crash_safety.py::test_sigkill_leaves_parseable_files[training-2.3]":
        "the same kill during training at 0.0 s and 0.37 s",
    "tests/test_distributed.py::test_torchrun_dash_m_daybreak_works":
        "test_two_processes_reach_the_digits_target (the same workers under torchrun, launched by daybreak)",
    "tests/test_leaderboard_trust.py::test_reproduce_a_daybreak_digits_entry_end_to_end":
        "test_the_server_queues_reproductions_for_the_worker (the same reproduction and records) and "
        "test_worker_and_reproduce_commands (the command line)",
}


@pytest.hookimpl(tryfirst=True)  # before `-m 'not slow'` deselects
def pytest_collection_modifyitems(config, items):
    files = {item.nodeid.split("::")[0] for item in items}
    found = set()
    for item in items:
        if item.nodeid in SLOW_DUPLICATES:
            item.add_marker(pytest.mark.slow)
            found.add(item.nodeid)
    stale = {t for t in SLOW_DUPLICATES if t.split("::")[0] in files} - found
    if stale:
        warnings.warn(f"conftest.SLOW_DUPLICATES names tests that no longer exist: {sorted(stale)}")


@pytest.fixture(autouse=True, scope="session")
def _repository_left_clean():
    """No test writes a run directory into the repository's own runs/ (a test without --out runs in tmp_path)."""
    before = set(os.listdir(REPO / "runs")) if (REPO / "runs").is_dir() else set()
    yield
    after = set(os.listdir(REPO / "runs")) if (REPO / "runs").is_dir() else set()
    assert after <= before, f"tests left {sorted(after - before)} in {REPO / 'runs'}"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Tests never touch the user's cache or database, and never download."""
    root = tmp_path_factory.mktemp("daybreak-home")
    monkeypatch.setenv("DAYBREAK_DATA", str(root / "data"))
    monkeypatch.setenv("DAYBREAK_CACHE", str(root / "cache"))
    monkeypatch.setenv("DAYBREAK_DB", f"sqlite:///{root / 'leaderboard.sqlite'}")
    yield


def single_line(text: str) -> bool:
    text = text.strip()
    return bool(text) and "\n" not in text and "Traceback" not in text


FAKE_WATTS = 40.0  # the fake CPU package below draws a steady 40 W


@pytest.fixture
def fake_rapl(tmp_path, monkeypatch):
    """A powercap tree whose package counter advances at exactly FAKE_WATTS with the wall clock (read on demand):
    energy tests compare joules with FAKE_WATTS x the seconds a clock counted."""
    import time

    from daybreak.measure import energy as en

    zone = tmp_path / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text(str(2**40) + "\n")
    (zone / "energy_uj").write_text("0\n")
    monkeypatch.setenv("DAYBREAK_POWERCAP_ROOT", str(tmp_path / "powercap"))
    monkeypatch.setattr(en, "_file_reader", lambda path: (lambda: int(time.perf_counter() * FAKE_WATTS * 1e6)))
    return zone
