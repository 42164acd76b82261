"""Types that serve users: a script using the documented API (docs/how-to/python-api.md) type-checks with `mypy
--strict` against the editable install the docs make (setuptools' compat mode, a path mypy follows), RunConfig taking
the target forms the docs show (``target="90%"``), and a real type error in such a script is found (so the check is
not vacuous)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = '''
"""A user's script, as the documentation shows the API."""
import daybreak
from daybreak import RunConfig

config = RunConfig(task="digits", target="90%", threads=1, overrides={"epochs": 3})
again = config.with_(seed=2, target=0.95)
target: float | None = again.target
result = daybreak.run(config, seed=3)
status: str = result.status
seconds: float | None = result.time_to_target_s
'''


def _mypy(tmp_path, text: str) -> subprocess.CompletedProcess:
    (tmp_path / "script.py").write_text(textwrap.dedent(text))
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / ".cache"),
                           "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def test_a_users_script_type_checks_against_the_installed_package(tmp_path):
    pytest.importorskip("mypy", reason="mypy comes with the test extra: pip install -e '.[test]'")
    done = _mypy(tmp_path, SCRIPT)
    assert "Cannot find implementation or library stub" not in done.stdout, (
        "mypy cannot see the editable install: reinstall with pip install -e . --config-settings "
        "editable_mode=compat (see docs/getting-started/install.md)")
    assert done.returncode == 0, done.stdout + done.stderr
    wrong = _mypy(tmp_path, SCRIPT + "count: int = result.status\n")
    assert wrong.returncode == 1, wrong.stdout  # the record's status is a Literal of str, not an int
    assert "script.py:12: error: Incompatible types in assignment" in wrong.stdout and "'reached'" in wrong.stdout


def test_run_config_reads_the_target_forms_the_readme_shows():
    import daybreak

    assert daybreak.RunConfig(target="90%").target == pytest.approx(0.9)
    assert daybreak.RunConfig(target=0.9).target == pytest.approx(0.9)
    assert daybreak.RunConfig(target="0.9").target == pytest.approx(0.9)


def test_the_slurm_executor_type_checks_without_submitit(tmp_path):
    """Without the slurm extra, submitit is Any to the checker: its job type must stay a type alias then (it became
    a variable, and `mypy --strict -p daybreak` gave 14 errors after `pip install -e ".[test]"`). A stub package
    whose every name is Any, first on MYPYPATH, stands in for the missing one; CI also checks the whole package
    with the optional extras removed (.ci/run)."""
    pytest.importorskip("mypy", reason="mypy comes with the test extra: pip install -e '.[test]'")
    from pathlib import Path

    stub = tmp_path / "stubs" / "submitit"
    stub.mkdir(parents=True)
    (stub / "__init__.pyi").write_text("from typing import Any\n\ndef __getattr__(name: str) -> Any: ...\n")
    slurm = Path(__file__).resolve().parents[1] / "daybreak" / "executors" / "slurm.py"
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "MYPYPATH": str(tmp_path / "stubs")}
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports", "silent", "--cache-dir",
                           str(tmp_path / ".cache"), str(slurm)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
