"""What daybreak writes is as readable as the umask allows (issue: every file was 0600 and every folder 0700,
so a leaderboard export could not be served and a report's index.html was private while its PNGs were not)."""

import os
import stat
from pathlib import Path

import pytest

from daybreak.cli import main
from daybreak.fileio import atomic_write_text, current_umask, make_temp_dir


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def modes(root: Path) -> dict[str, int]:
    out = {".": stat.S_IMODE(root.stat().st_mode)}
    for p in root.rglob("*"):
        out[p.relative_to(root).as_posix()] = stat.S_IMODE(p.stat().st_mode)
    return out


def test_atomic_writes_and_temp_dirs_follow_the_umask(tmp_path, umask):
    assert current_umask() == 0o022
    path = atomic_write_text(tmp_path / "a.txt", "x")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(make_temp_dir(tmp_path, ".t.").stat().st_mode) == 0o755
    umask(0o077)
    assert current_umask() == 0o077
    assert stat.S_IMODE(atomic_write_text(tmp_path / "b.txt", "x").stat().st_mode) == 0o600
    assert stat.S_IMODE(make_temp_dir(tmp_path, ".u.").stat().st_mode) == 0o700


def test_a_run_a_report_and_an_export_are_publishable_under_umask_022(tmp_path, umask, capsys):
    run = tmp_path / "run"
    assert main(["run", "--out", str(run), "-q", "--threads", "1"]) == 0
    db = f"sqlite:///{tmp_path / 'lb.sqlite'}"
    assert main(["leaderboard", "import", str(run), "--db", db]) == 0
    assert main(["leaderboard", "export", str(tmp_path / "site"), "--db", db]) == 0
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    for root in (run, tmp_path / "site", tmp_path / "report"):
        found = modes(root)
        assert len(found) > 3, root
        for name, mode in found.items():
            is_dir = name == "." or (root / name).is_dir()
            assert mode == (0o755 if is_dir else 0o644), (root.name, name, oct(mode))
