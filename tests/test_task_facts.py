"""Task facts asked of the Task, not kept in tables elsewhere: what `daybreak evaluate` and `daybreak infer` read
from a task (see test_task_contract.py for a whole new task through every command)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from daybreak.cli import main
from daybreak.infer.run_data import choose_data, recorded_folder
from daybreak.records.run import RunResult
from daybreak.tasks import TASKS, get_task

from conftest import single_line


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("digits") / "run"
    assert main(["run", "digits", "--set", "epochs=1", "--full-schedule", "--out", str(out), "-q"]) in (0, 3)
    return out


def test_evaluate_refuses_a_data_dir_for_a_task_whose_data_ships_in_a_package(digits_run, tmp_path, capsys):
    assert main(["evaluate", str(digits_run), "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert single_line(err) and "task digits reads data bundled in a package" in err
    assert "(cifar10, imagenet, mnist, squad)" in err  # the tasks with files, from the catalog


def test_infer_reads_the_folder_the_task_says_a_recorded_source_means(digits_run, tmp_path):
    """A task's own folder_of_source decides which folder a run's data_source means (no table in infer/)."""
    result = RunResult.load(digits_run)
    assert recorded_folder(result) is None  # digits: bundled, no folder
    folder = tmp_path / "files"
    folder.mkdir()
    with_files = dataclasses.replace(get_task("digits"), has_data_dir=True,
                                     folder_of_source=lambda source: Path(source).parent)
    recorded = result.model_copy(update={"data_source": str(folder / "digits.npz")})
    with TASKS.override("digits", with_files):
        assert recorded_folder(recorded) == folder
        choice = choose_data(recorded, digits_run, None)
        assert (choice.data_dir, choice.origin) == (folder, "run")
