"""Who ran an entry and what code: the run's --author, its git commit and recipe hash, a link to the commit where
the checkout's remote is on a known host; truthful 'not ranked' reasons."""

import json
from types import SimpleNamespace

import pytest

from daybreak.cli import main
from daybreak.leaderboard.ranking.objectives import OBJECTIVES, unranked_reason
from daybreak.leaderboard.ingest.runs_import import code_link
from daybreak.leaderboard.web.pages import Site
from daybreak.leaderboard.store.database import Store
from daybreak.measure.context import without_credentials


@pytest.mark.parametrize("remote,commit,link", [
    ("git@github.com:acme/bench.git", "abc1234", "https://github.com/acme/bench/tree/abc1234"),
    ("https://github.com/acme/bench", "abc1234", "https://github.com/acme/bench/tree/abc1234"),
    ("ssh://git@gitlab.com/acme/sub/bench.git", "abc1234", "https://gitlab.com/acme/sub/bench/-/tree/abc1234"),
    ("https://git.example.org/bench.git", "abc1234", "https://git.example.org/bench.git"),
    ("git@git.example.org:bench.git", "abc1234", ""),  # no web address to point at: the page shows the commit
    ("/srv/git/bench.git", "abc1234", ""),
    (None, "abc1234", ""),
])
def test_code_link(remote, commit, link):
    assert code_link(remote, commit) == link


def test_credentials_never_leave_the_machine():
    assert without_credentials("https://me:ghp_secret@github.com/acme/bench.git") == "https://github.com/acme/bench.git"
    assert without_credentials("git@github.com:acme/bench.git") == "git@github.com:acme/bench.git"


def test_an_imported_run_shows_its_author_commit_and_recipe_hash(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["run", "--out", str(run), "-q", "--threads", "1", "--author", "Ada Lovelace",
                 "--author-email", "ada@example.org"]) == 0
    record = json.loads((run / "result.json").read_text())
    assert record["author"] == "Ada Lovelace" and record["author_email"] == "ada@example.org"
    db = f"sqlite:///{tmp_path / 'lb.sqlite'}"
    assert main(["leaderboard", "import", str(run), "--db", db]) == 0
    capsys.readouterr()
    with Store(db) as store:
        entry = store.entries()[0]
        assert entry.author == "Ada Lovelace" and entry.author_email == "ada@example.org"
        assert entry.recipe_sha256 == record["context"]["recipe_sha256"] and len(entry.recipe_sha256) == 64
        assert entry.code_commit == (record["context"]["git_commit"] or None)
        assert entry.code_url != "https://pypi.org/project/daybreak/"
        assert entry.accelerator == "CPU only" and entry.accelerator_count == 0 and entry.framework_name == "PyTorch"
        page = Site(store).entry_html(entry)
    assert "Ada Lovelace" in page and "ada@example.org" in page and entry.recipe_sha256 in page
    if entry.code_commit:
        assert entry.code_commit in page
    # the sub-second training time shows milliseconds on the entry page
    assert f"{entry.time_to_target_s:.3f}"[-3:] in page
    assert "not ranked (no price given)" in page  # train-cost: no --instance
    assert "not ranked (no energy: " in page  # train-energy: no counter on this machine, with the reason


def test_a_record_from_before_the_author_field_takes_its_dawnbench_json(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["run", "--out", str(run), "-q", "--threads", "1", "--author", "Grace Hopper"]) == 0
    record = json.loads((run / "result.json").read_text())
    del record["author"], record["author_email"]
    (run / "result.json").write_text(json.dumps(record))
    db = f"sqlite:///{tmp_path / 'lb.sqlite'}"
    assert main(["leaderboard", "import", str(run), "--db", db]) == 0
    capsys.readouterr()
    with Store(db) as store:
        assert store.entries()[0].author == "Grace Hopper"


def test_unranked_reasons_are_true_for_each_objective():
    dawnbench = SimpleNamespace(time_to_target_s=10.0, notes=[], source_format="dawnbench-v1")
    assert unranked_reason(dawnbench, OBJECTIVES["train-cost"]) == "no price given"
    assert unranked_reason(dawnbench, OBJECTIVES["train-energy"]) == "no energy figure: DAWNBench submissions carry none"
    run = SimpleNamespace(time_to_target_s=1.0, source_format="daybreak.run",
                          notes=["no energy: not ranked on train-energy (energy unavailable: gpu: no GPU)"])
    assert unranked_reason(run, OBJECTIVES["train-energy"]) == "no energy: energy unavailable: gpu: no GPU"
    unreached = SimpleNamespace(time_to_target_s=None, notes=[], source_format="daybreak.run")
    assert unranked_reason(unreached, OBJECTIVES["train-cost"]) == "did not reach the target"
