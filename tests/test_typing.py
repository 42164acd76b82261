"""Types that serve users: a script using the README's API type-checks with `mypy --strict` against the editable
install the README makes (setuptools' compat mode, a path mypy follows), RunConfig taking the target forms the
README shows (``target="90%"``), and a real type error in such a script is found (so the check is not vacuous)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = '''
"""A user's script, as the README shows the API."""
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
        "editable_mode=compat (see the README's Setup)")
    assert done.returncode == 0, done.stdout + done.stderr
    wrong = _mypy(tmp_path, SCRIPT + "count: int = result.status\n")
    assert wrong.returncode == 1, wrong.stdout  # the record's status is a Literal of str, not an int
    assert "script.py:12: error: Incompatible types in assignment" in wrong.stdout and "'reached'" in wrong.stdout


def test_run_config_reads_the_target_forms_the_readme_shows():
    import daybreak

    assert daybreak.RunConfig(target="90%").target == pytest.approx(0.9)
    assert daybreak.RunConfig(target=0.9).target == pytest.approx(0.9)
    assert daybreak.RunConfig(target="0.9").target == pytest.approx(0.9)
