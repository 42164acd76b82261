import os
import shutil
import subprocess
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

# Long end-to-end tests (each 7 to 35 s: several fresh `daybreak run` processes, a Slurm job array, a compile) moved
# to `pytest -m slow`, which CI runs right after the default suite (with the same PostgreSQL and Slurm), so that the
# default suite stays near 5 minutes on 2 cores. Test id -> the default-suite test that covers the same code faster.
SLOW_END_TO_END = {
    "tests/test_options.py::test_readme_python_api_section_runs":
        "test_python_api_mistakes_are_one_config_error and the API's commands' own tests (5 runs: 33 s)",
    "tests/test_experiments.py::test_ab_on_digits_prints_ratio_interval_and_verdict":
        "test_paired_ratio_matches_scipy, test_repeat_trials_are_fresh_daybreak_run_processes",
    "tests/test_experiments.py::test_a_killed_experiment_resumes_without_rerunning_finished_trials":
        "test_a_killed_experiment_leaves_no_trial_running (test_executors.py)",
    "tests/test_gpu_ready.py::test_the_warm_up_leaves_weights_optimizer_and_random_state_as_they_were":
        "test_init_runs_before_the_data_and_the_mllog_passes_the_checker",
    "tests/test_experiments_remote.py::test_a_lesion_runs_its_arms_as_one_slurm_job_array":
        "test_lesion_arms_are_interleaved_fresh_processes, test_exit_codes_logs_order_and_one_at_a_time[slurm]",
    "tests/test_experiments_remote.py::test_repeat_trials_run_as_a_slurm_job_array_and_a_killed_one_resumes":
        "test_a_daybreak_run_trial_through_each_executor, test_exit_codes_logs_order_and_one_at_a_time[slurm]",
    "tests/test_experiments_remote.py::test_throughput_configurations_as_jobs":
        "test_exit_codes_logs_order_and_one_at_a_time[submitit-local]",
    "tests/test_experiments_remote.py::test_a_leaderboard_reproduction_runs_through_the_slurm_code_path":
        "test_worker_and_reproduce_commands, test_the_server_queues_reproductions_for_the_worker",
    "tests/test_task_contract.py::test_throughput_takes_the_tasks_model_and_its_real_data":
        "test_catalog.py's throughput contract over every registered task",
    "tests/test_analysis.py::test_lesion_digits_augment": "test_lesion_arms_are_interleaved_fresh_processes",
    "tests/test_analysis.py::test_repeat_records_unreached_runs_and_goes_on": "test_repeat_summary_statistics",
    "tests/test_throughput.py::test_failures_are_recorded_and_find_max_batch_halves_until_it_fits":
        "test_sweep_writes_every_output_with_consistent_numbers",
    "tests/test_leaderboard_trust.py::test_static_export_grows_linearly": "test_static_export_writes_the_same_pages",
    "tests/test_cifar10_recipe.py::test_each_cifar_recipe_trains_on_synthetic_cifar_files[cifar10_96]":
        "the same test for cifar10 and cifar10_muon; test_cifar10_96_is_airbench96s_residual_net_and_schedule",
    "tests/test_cifar10_recipe.py::test_end_to_end_run_with_the_hooks_on_is_deterministic":
        "test_end_to_end_on_a_synthetic_cifar_tarball_reaches_its_target",
    "tests/test_distributed.py::test_a_failing_rank_ends_the_run_quickly":
        "test_two_processes_reach_the_digits_target (the same launcher)",
    "tests/test_distributed.py::test_two_processes_reach_the_mnist_target_with_the_recipes_defaults":
        "test_two_processes_reach_the_digits_target",
    "tests/test_executors.py::test_slurm_task_lost_without_a_result_is_an_outcome_error":
        "test_exit_codes_logs_order_and_one_at_a_time[slurm]",
    "tests/test_warmup_shapes.py::test_no_shape_inside_the_clock_that_the_warm_up_did_not_see[cifar10_muon]":
        "the same test for cifar10 (the same data path, batch source, evaluator and whitening; only the optimizer "
        "differs)",
    # the same test on the other database / the other executor stays in the default suite
    "tests/test_leaderboard_trust.py::test_connections_have_time_and_size_limits[postgresql]":
        "the same limits on SQLite (the database is not involved)",
    "tests/test_leaderboard_trust.py::test_the_server_queues_reproductions_for_the_worker[postgresql]":
        "the same queue on SQLite; test_leaderboard_store.py runs the store itself on PostgreSQL",
    "tests/test_executors.py::test_parallel_trials_run_together[slurm]": "the same test through submitit-local",
    "tests/test_executors.py::test_keyboard_interrupt_stops_everything[slurm]": "the same test through submitit-local",
    "tests/test_clock_rules.py::test_sigterm_ends_other_commands_like_ctrl_c[command0]":
        "test_sigterm_is_recorded_like_ctrl_c (the same handler, installed by the CLI for every command)",
    "tests/test_clock_rules.py::test_sigterm_ends_other_commands_like_ctrl_c[command1]":
        "test_sigterm_is_recorded_like_ctrl_c (the same handler, installed by the CLI for every command)",
}
for _id in SLOW_END_TO_END:
    assert _id not in SLOW_DUPLICATES, _id
SLOW = {**SLOW_DUPLICATES, **SLOW_END_TO_END}


@pytest.hookimpl(tryfirst=True)  # before `-m 'not slow'` deselects
def pytest_collection_modifyitems(config, items):
    files = {item.nodeid.split("::")[0] for item in items}
    found = set()
    for item in items:
        if item.nodeid in SLOW:
            item.add_marker(pytest.mark.slow)
            found.add(item.nodeid)
    stale = {t for t in SLOW if t.split("::")[0] in files} - found
    if stale:
        warnings.warn(f"conftest.SLOW_DUPLICATES/SLOW_END_TO_END name tests that no longer exist: {sorted(stale)}")


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
    # A peak measured on a busy machine, or with repeats far apart, is not a ceiling (daybreak.sweep.peak); the
    # tests share 2 cores with other work, so outside the tests of that rule the ceilings are kept (noted), and
    # no test depends on how loaded the machine is. tests/test_throughput.py's peak tests unset it.
    monkeypatch.setenv("DAYBREAK_PEAK_ACCEPT_NOISY", "1")
    yield


def single_line(text: str) -> bool:
    text = text.strip()
    return bool(text) and "\n" not in text and "Traceback" not in text


# --- headless Chromium for the leaderboard page tests -----------------------------------------------------------
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage")


def chromium_or_skip() -> str:
    """The Chromium executable; skips the calling test where none is installed."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium)")
    return browser


def chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """One headless Chromium call with its own profile folder."""
    return subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=120)


def screenshot(browser: str, url: str, shot: Path, window_size: str, keep_as: str) -> None:
    """A PNG of ``url`` at ``shot`` (asserted to be a real picture); kept as ``keep_as`` in DAYBREAK_SCREENSHOT_DIR
    when that is set."""
    r = chromium(browser, shot.with_suffix(".profile"), f"--screenshot={shot}", f"--window-size={window_size}",
                 "--hide-scrollbars", url)
    assert r.returncode == 0 and shot.is_file() and shot.stat().st_size > 10_000, r.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("DAYBREAK_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / keep_as)


FAKE_WATTS = 40.0  # the fake CPU package below draws a steady 40 W


@pytest.fixture
def fake_rapl(tmp_path, monkeypatch):
    """A powercap tree whose package counter advances at exactly FAKE_WATTS with the clock: its value is FAKE_WATTS
    x the time.perf_counter() the meter took just before reading it (the instant its snapshot carries), so joules
    are FAKE_WATTS x the seconds between two reads however busy the machine is (a counter read a few ms after that
    instant once put a test 4% off under load)."""
    import threading
    import time
    import types

    from daybreak.measure import energy as en

    zone = tmp_path / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text(str(2**40) + "\n")
    (zone / "energy_uj").write_text("0\n")
    monkeypatch.setenv("DAYBREAK_POWERCAP_ROOT", str(tmp_path / "powercap"))
    last = threading.local()

    def perf_counter() -> float:
        last.t = time.perf_counter()
        return last.t

    monkeypatch.setattr(en, "time", types.SimpleNamespace(perf_counter=perf_counter, sleep=time.sleep,
                                                          monotonic=time.monotonic, time=time.time))
    monkeypatch.setattr(en, "_file_reader", lambda path: (lambda: int(last.t * FAKE_WATTS * 1e6)))
    return zone


@pytest.fixture
def one_thread():
    """Tiny CPU models at one thread: on a shared 2-core machine two threads per process run 10x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
