"""The documentation's examples, executed as written (not just parsed), and checked to do what the documentation
says they do; the docstrings' examples too (daybreak/__init__.py, examples/recipes/digits_wide.py). The
documentation is README.md and every page of the site, docs/**/*.md (tests/doc_pages.py), so an example keeps
running when its section moves from the README into the site.

Every command line of their ``bash`` blocks is either run here (RUN: the test that runs it) or listed in NOT_RUN
with the reason (data that is not on this machine, a GPU, a cluster, a placeholder): a new example must be put in
one or the other. Each run takes under two minutes on this project's 2-core machine; together they take
several, so they are slow tests (``pytest -m slow``, which CI runs), but for the cheap ones in test_options.py.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import pytest
from doc_pages import DOC_FILES, bash_commands, doc_text

import daybreak
from daybreak.analysis.commands import DEFAULT_ANALYSIS_DIR
from daybreak.cli import main
from daybreak.records.run import RunResult

ROOT = Path(daybreak.__file__).parent.parent

# prefix of a documented command line -> why it is not run here
NOT_RUN = {
    "make ": "sets up the environment these tests run in",
    "daybreak run mnist": "needs the MNIST files (downloaded; tests/test_options.py runs the tiny synthetic-MNIST "
                          "example)",
    "python -c \"from daybreak.data.synthetic import write_mnist": "tests/test_options.py::"
                                                                  "test_readme_tiny_mnist_example_reaches_its_target",
    "daybreak run cifar10": "needs CIFAR-10 and GPUs",
    "torchrun ": "tests/test_distributed.py::test_torchrun_dash_m_daybreak_works runs it",
    "daybreak throughput --model resnet50": "ResNet-50 at batch 64-256: hours on 2 CPU cores",
    "daybreak throughput --model bert_base": "BERT-base on 8 devices",
    "daybreak throughput --model mnist_cnn": "needs the MNIST files",
    "daybreak ab digits --a-set lr=0.1 --b-set lr=0.2 --runs 10": "20 trials: over two minutes here "
                                                                 "(tests/test_experiments.py runs 2 pairs of it)",
    "daybreak ab digits --b-recipe": "20 trials or more: over two minutes here",
    "daybreak ab digits --recipe my_recipe.py": "a placeholder: your recipe file in a git checkout",
    "daybreak ab mnist": "a placeholder: your own train.py (and the MNIST files)",
    "python3 -m venv /shared": "a Slurm cluster's shared file system",
    "pip install": "installs packages (a Slurm cluster's shared file system; the install guide: CI installs the "
                   "wheel into a fresh environment, .ci/wheel-smoke.sh)",
    "tmux ": "a Slurm cluster's login node",
    "daybreak repeat cifar10": "a Slurm cluster",
    "daybreak analyze roofline": "needs a ResNet-50 throughput sweep (throughput/resnet50-train)",
    "daybreak analyze scaling": "needs sweeps and CIFAR-10 runs on GPUs",
    "daybreak lesion cifar10": "needs CIFAR-10 and a GPU",
    "daybreak evaluate runs/mnist-run": "needs MNIST runs and another MNIST set",
    "daybreak analyze score": "needs runs on digits and MNIST",
    "daybreak report": "needs the CIFAR-10 lesion and the ResNet-50 sweep",
    "daybreak leaderboard": "placeholders (entry numbers, runs, a token file, an MLPerf results checkout); "
                            "tests/test_leaderboard*.py run each command",
    "bash benchmarks/gpu_suite.sh": "the lent GPU machine (tests/test_gpu_suite.py rehearses it)",
    "python benchmarks/mlperf_agreement.py": "needs the published training_results_v0.7 ... v6.0 checkouts "
                                             "(tests/test_mlperf_benchmarks.py checks the same logic on small logs)",
    "daybreak throughput --frameworks": "the framework extras and minutes per configuration here "
                                        "(tests/test_throughput_programs.py runs each program, slow)",
    "daybreak throughput --model my_net --program": "a placeholder: your own train.py (tests/"
                                                    "test_throughput_programs.py runs the protocol on a fake program)",
    "mkdocs build --strict": "tests/test_docs.py::test_the_site_builds_strictly runs it (slow), and so does CI",
    "sudo ": "installs PostgreSQL and makes its role and database (as root; .ci/start-postgres.sh does the same for "
             "the leaderboard's PostgreSQL tests)",
    "export DAYBREAK_DB=": "a placeholder password; the leaderboard's tests pass their database as --db or DAYBREAK_DB",
    "python -c \"import secrets": "writes a token file (tests/test_leaderboard_*.py serve boards with token files)",
    "chmod 600 tokens.txt": "the token file's mode",
    "curl ": "a public host (tests/test_leaderboard_trust.py and test_leaderboard_api.py upload to a served board)",
    ".venv/bin/mkdocs serve": "a server that runs until it is stopped (`make docs` builds the same site; "
                              "tests/test_docs.py::test_the_site_builds_strictly builds it)",
    "st --config-file tests/schemathesis.toml": "a served board and its token: tests/test_leaderboard_api.py runs "
                                                "this very command against one",
}

# the documented command lines these tests run (each also named in the test that runs it)
CHEAP = ["daybreak run", "daybreak tasks", "daybreak recipes [NAME]", "daybreak instances"]  # test_options.py
MAIN = ["daybreak run digits --seed 3 --set epochs=20 --set lr=0.05 --full-schedule --out runs/lr005",
        "daybreak show runs/lr005",
        "daybreak run --config run.toml",
        "daybreak run --config runs/lr005/config.toml --out runs/lr005-again",
        "daybreak run --config run.toml --seed 4 --set lr=0.2",
        "daybreak run digits --nproc-per-node 2"]
PEAK = ["daybreak peak", "daybreak peak --budget 30 --precisions fp32,bf16"]
EXPERIMENTS = ["daybreak repeat digits --runs 5 --out exp/digits5",
               "daybreak repeat digits --runs 5 --out exp/digits5 --resume",
               "daybreak lesion digits --runs 5 --out exp/lesion-digits",
               "daybreak ab digits --runs 5 --out exp/aa",
               "daybreak analyze threshold exp/digits5",
               "daybreak compare exp/digits5 -- exp/lesion-digits/no-augment"]
RUN = CHEAP + MAIN + PEAK + EXPERIMENTS


def readme_commands() -> list[str]:
    """Every command line of the documentation's bash blocks (README.md and docs/**/*.md), continuations joined,
    comments dropped, in order."""
    return bash_commands()


def test_every_documented_command_is_run_or_says_why():
    assert DOC_FILES[0].name == "README.md" and len(DOC_FILES) > 1  # the site's pages are read too
    unclassified = [c for c in readme_commands() if c not in RUN and not any(c.startswith(p) for p in NOT_RUN)]
    assert unclassified == []
    assert [c for c in RUN if c not in readme_commands()] == []  # what these tests run is still documented


def test_the_commands_of_a_docs_page_are_read_like_the_readmes(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```bash\ndaybreak run digits\\\n  --seed 3   # a comment\n# only a comment\n```\n"
                    "\n```text\ndaybreak not-a-command-block\n```\n")
    assert bash_commands([page]) == ["daybreak run digits --seed 3"]


def _run(line: str) -> int:
    assert line in RUN and line in readme_commands()
    return main(shlex.split(line)[1:])


def _newest_run(folder: Path, before: set[Path]) -> RunResult:
    (new,) = [p for p in folder.iterdir() if p not in before]
    return RunResult.load(new)


@pytest.mark.slow
def test_readme_run_show_config_and_two_processes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _run(MAIN[0]) == 0  # reached, then the whole 20-epoch schedule
    lr005 = RunResult.load(tmp_path / "runs" / "lr005")
    assert lr005.reached and len(lr005.history) == 20 and lr005.hyperparameters["lr"] == 0.05
    capsys.readouterr()
    assert _run(MAIN[1]) == 0 and "REACHED" in capsys.readouterr().out
    toml = re.search(r"```toml\n(# run.toml\n.*?)```", doc_text(), re.S)
    assert toml, "the documentation shows run.toml"
    (tmp_path / "run.toml").write_text(toml.group(1))
    before = set((tmp_path / "runs").iterdir())
    assert _run(MAIN[2]) == 0
    from_file = _newest_run(tmp_path / "runs", before)
    assert (from_file.seed, from_file.target, from_file.threads) == (3, 0.97, 1)
    assert (from_file.hyperparameters["epochs"], from_file.hyperparameters["lr"]) == (20, 0.05)
    assert _run(MAIN[3]) == 0  # run lr005 again: the same recipe, seed and options
    again = RunResult.load(tmp_path / "runs" / "lr005-again")
    assert (again.seed, again.recipe, again.hyperparameters) == (lr005.seed, lr005.recipe, lr005.hyperparameters)
    assert again.context.recipe_sha256 == lr005.context.recipe_sha256 and again.reached
    before = set((tmp_path / "runs").iterdir())
    assert _run(MAIN[4]) == 0  # flags over the file, --set merged key by key
    flags = _newest_run(tmp_path / "runs", before)
    assert (flags.seed, flags.hyperparameters["lr"], flags.hyperparameters["epochs"]) == (4, 0.2, 20)
    before = set((tmp_path / "runs").iterdir())
    assert _run(MAIN[5]) == 0  # 2 gloo processes reach 98% with global batch 64
    two = _newest_run(tmp_path / "runs", before)
    assert two.reached and two.world_size == 2 and two.global_batch_size == 64


@pytest.mark.slow
def test_readme_peak_examples(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _run(PEAK[0]) == 0
    text = capsys.readouterr().out
    assert "fp32" in text and "copy bandwidth" in text
    assert _run(PEAK[1]) == 0  # what the first measured is cached: nothing left to measure within its budget
    text = capsys.readouterr().out
    assert "fp32" in text and "bf16" in text


@pytest.mark.slow
def test_readme_experiment_and_analysis_examples(tmp_path, monkeypatch, capsys):
    from daybreak.records.experiment import AbSummary, Experiment
    from daybreak.records.lesion import LesionSummary
    from daybreak.records.repeat import RepeatSummary

    monkeypatch.chdir(tmp_path)
    assert _run(EXPERIMENTS[0]) == 0  # stability over 5 seeds
    s = RepeatSummary.load(tmp_path / "exp" / "digits5")
    assert s.n_runs == 5 and s.n_reached >= 1
    assert s.time_to_target.ci_low_s is None or s.time_to_target.ci_low_s > 0  # a time's interval is never negative
    assert _run(EXPERIMENTS[1]) == 0  # after a kill: only the unfinished trials (here none)
    exp = Experiment.load(tmp_path / "exp" / "digits5")
    assert len(exp.invocations) == 2 and {t.invocation for t in exp.trials} == {0}
    assert _run(EXPERIMENTS[2]) == 0  # each switch off in turn vs the full recipe
    lesion = LesionSummary.load(tmp_path / "exp" / "lesion-digits")
    assert [v.name for v in lesion.variants] == ["full", "no-augment"] and lesion.variants[1].comparison
    capsys.readouterr()
    assert _run(EXPERIMENTS[3]) == 0  # an A/A test: the interval must hold 1
    aa = AbSummary.load(tmp_path / "exp" / "aa").comparison.time
    assert aa.verdict == "not distinguishable" and aa.ci_low <= 1 <= aa.ci_high, capsys.readouterr().out
    assert _run(EXPERIMENTS[4]) == 0  # time-to-target from 4 points below the target to it
    threshold = json.loads((tmp_path / DEFAULT_ANALYSIS_DIR / "threshold.json").read_text())
    assert threshold["thresholds"][0] == pytest.approx(0.94) and threshold["thresholds"][-1] == pytest.approx(0.98)
    assert _run(EXPERIMENTS[5]) == 0


@pytest.mark.slow
def test_the_packages_docstring_example_runs(tmp_path, monkeypatch):
    """daybreak/__init__.py's notebook example, executed as written: the run reaches its target, the repeat and
    the A/B have their numbers."""
    doc = daybreak.__doc__ or ""
    block = doc.split("In a notebook::", 1)[1].split("\n\nEvery keyword", 1)[0]
    code = "\n".join(line[4:] for line in block.splitlines())
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(compile(code, "daybreak/__init__.py", "exec"), names)  # noqa: S102 - our own docstring
    assert names["result"].status == "reached"
    assert names["summary"].n_runs == 2 and names["summary"].n_reached == 2
    assert names["ab"].comparison.time.ratio is not None and names["ab"].comparison.time.verdict


@pytest.mark.slow
def test_the_example_recipes_docstring_runs(tmp_path):
    """examples/recipes/digits_wide.py's docstring: two command lines and a Python one-liner, run as written from
    a folder holding examples/ as the repository does (the one-liner once called daybreak.run('digits', PATH), a
    TypeError)."""
    import shutil
    import subprocess
    import sys

    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    doc = ast.get_docstring(ast.parse((ROOT / "examples" / "recipes" / "digits_wide.py").read_text()))
    lines = [ln.strip() for ln in (doc or "").splitlines() if ln.strip().startswith(("daybreak ", "python -c"))]
    assert len(lines) == 3
    for line in lines:
        argv = shlex.split(line)
        argv = [sys.executable, "-m", "daybreak", *argv[1:]] if argv[0] == "daybreak" else [sys.executable, *argv[1:]]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (line, done.stderr)
    assert done.stdout.strip().endswith("reached")
