"""Every user mistake, on every command, is one line on stderr and a documented exit status (2 unless the
command documents another), never a traceback.

MISTAKES is the table: (command line, exit status, a fragment of the one line). Each row runs in-process through
``daybreak.cli.main`` in a scratch folder holding a few small files to get wrong (see ``scratch``); every row fails
before any training, download or measurement starts. ``test_every_command_has_a_mistake`` keeps the table
covering each command that `daybreak --help` lists.
"""

from __future__ import annotations

import math
import shlex

import pytest

from daybreak.cli import SEED_MAX, build_parser, main
from daybreak.errors import ConfigError
from daybreak.recipes import get_recipe, parse_overrides, recipe_names

TOO_BIG_SEED = str(2**70)  # 1180591620717411303424
SEED_RANGE = f"a seed must be an integer in [0, {SEED_MAX}]"

# In the scratch folder: bad.json (truncated JSON), notes.txt (plain text), empty/ (an empty folder);
# missing* names do not exist.
MISTAKES: list[tuple[str, int, str]] = [
    # run: names, hyperparameters, seeds, flags, paths
    ("run nosuchtask", 2, "unknown task 'nosuchtask'"),
    ("run --recipe mnist digits", 2, "recipe mnist is for task mnist, not digits"),
    ("run --set lr=-1", 2, "lr=-1.0: must be a number >= 0"),
    ("run --set lr=nan", 2, "--set lr=nan: must be a finite number"),
    ("run --set weight_decay=inf", 2, "--set weight_decay=inf: must be a finite number"),
    ("run --set momentum=1.5", 2, "momentum=1.5: must be a number in [0, 1)"),
    ("run --set label_smoothing=-0.1", 2, "label_smoothing=-0.1: must be a number in [0, 1)"),
    ("run --set epochs=0", 2, "epochs=0: must be an integer >= 1"),
    ("run --set batch_size=-64", 2, "batch_size=-64: must be an integer >= 1"),
    ("run --set epochs=2.5", 2, "--set epochs=2.5: expected an integer"),
    ("run --set epochs=99999999999999999999", 2, "too large"),
    ("run --set augment=maybe", 2, "--set augment=maybe: expected true or false"),
    ("run --set nosuch=1", 2, "--set nosuch: unknown hyperparameter"),
    ("run --set lr", 2, "expected KEY=VALUE"),
    ("run cifar10 --set lr_per_1024=0", 2, "lr_per_1024=0.0: must be a number > 0"),
    ("run imagenet --set workers=-2", 2, "workers=-2: must be an integer >= -1"),
    ("run squad --set dropout=1", 2, "dropout=1.0: must be a number in [0, 1)"),
    (f"run --seed {TOO_BIG_SEED}", 2, SEED_RANGE),
    ("run --seed -1", 2, SEED_RANGE),
    ("run --seed 0x10", 2, "--seed 0x10: expected an integer"),
    ("run --threads 99999999999999999999", 2, "--threads 99999999999999999999: too large"),
    ("run --target 150", 2, "--target 150: a fraction must be in (0, 1]"),
    ("run --threads 0", 2, "--threads 0: must be an integer >= 1"),
    ("run --eval-every 0", 2, "--eval-every 0: must be an integer >= 1"),
    ("run --cost-per-hour -1", 2, "--cost-per-hour -1: must be a finite number >= 0"),
    ("run --dist-timeout nan", 2, "--dist-timeout nan: must be a finite number > 0"),
    ("run --nproc-per-node 0", 2, "--nproc-per-node 0: must be an integer >= 1"),
    ("run --instance nosuch", 2, "not in the price catalog"),
    ("run --device tpu", 2, "--device tpu: choose auto|cpu|cuda|cuda:N|mps"),
    ("run --amp fp8", 2, "--amp fp8: choose one of auto, off, bf16, fp16"),
    ("run --rules fastest", 2, "--rules fastest: choose one of dawnbench, mlperf"),
    ("run --epochs 3", 2, "run: unrecognized arguments: --epochs"),
    ("run --out notes.txt", 2, "--out notes.txt: exists and is not a directory"),
    ("run --out notes.txt/run", 2, "notes.txt is not a directory"),
    ("run mnist --no-download --data-dir empty", 2, "not found in"),
    # show, tasks, recipes, instances
    ("show missing-run", 2, "no result.json here"),
    ("show notes.txt", 2, "notes.txt: not readable JSON"),
    ("show", 2, "the following arguments are required: run_dir"),
    ("tasks digits", 2, "tasks: unrecognized arguments: digits"),
    ("recipes nosuch", 2, "unknown recipe 'nosuch'"),
    ("instances --cheapest", 2, "instances: unrecognized arguments: --cheapest"),
    # leaderboard (import: exit status 1 when anything was skipped, as documented)
    ("leaderboard", 2, "the following arguments are required: SUBCOMMAND"),
    ("leaderboard import missing-run", 1, "skipped missing-run: no such file or directory"),
    ("leaderboard import bad.json", 1, "skipped bad.json: invalid JSON"),
    ("leaderboard show --task digits --objective fastest", 2, "invalid choice: 'fastest'"),
    ("leaderboard show --task digits --objective train-time --top 0", 2, "--top must be at least 1"),
    ("leaderboard serve --port 99999", 2, "--port 99999: not a TCP port"),
    ("leaderboard serve --token-file missing.txt", 2, "cannot read the token file"),
    ("leaderboard export notes.txt", 2, "notes.txt: exists and is not a folder"),
    # time
    ("time --task digits", 2, "give the program to time after --"),
    ("time --task nosuch -- true", 2, "unknown task 'nosuch'"),
    ("time --task digits -- no-such-program-xyz", 2, "not found on PATH"),
    ("time --task digits --log missing.log", 2, "--log missing.log: cannot read it"),
    ("time --task digits --log empty", 2, "--log empty: cannot read it"),
    ("time --task digits --log notes.txt", 2, "no :::MLLOG records"),
    ("time --log notes.txt", 2, "no :::MLLOG records"),
    ("time -- true", 2, "--task is required"),
    # check-mllog
    ("check-mllog missing-run", 2, "missing-run: no such file or run directory"),
    ("check-mllog empty", 2, "empty: no mllog.log here"),
    ("check-mllog notes.txt", 2, "the log names no submission_benchmark"),
    ("check-mllog notes.txt --ruleset 9", 2, "--ruleset '9': give an mlperf-logging training ruleset"),
    ("time --task digits --grace-s nan -- true", 2, "'nan': must be a finite number"),
    ("time --task digits --clock-tolerance lots -- true", 2, "--clock-tolerance 'lots'"),
    ("time --task digits --out notes.txt/run -- true", 2, "notes.txt is not a directory"),
    # infer
    ("infer missing-run", 2, "no such run directory"),
    ("infer empty", 2, "no result.json here"),
    ("infer empty --batch-size 0", 2, "--batch-size 0: must be >= 1"),
    ("infer empty --warmup -1", 2, "--warmup -1: must be >= 0"),
    ("infer empty --loadgen-min-duration nan", 2, "'nan': must be a finite number"),
    ("infer empty --cost-per-hour 1 --instance gcp-g2-standard-4", 2, "give --cost-per-hour or --instance, not both"),
    # throughput and peak
    ("throughput --model nosuch", 2, "unknown model 'nosuch'"),
    ("throughput --batch-sizes 32", 2, "the following arguments are required: --model"),
    ("throughput --model digits_cnn --batch-sizes 0", 2, "--batch-sizes"),
    ("throughput --model digits_cnn --amp fp8", 2, "--amp 'fp8'"),
    ("throughput --model digits_cnn --steps x", 2, "invalid int value: 'x'"),
    ("throughput --model digits_cnn --timeout nan", 2, "'nan': must be a finite number"),
    ("throughput --model digits_cnn --out notes.txt", 2, "exists and is not a directory"),
    ("throughput --model digits_cnn --out notes.txt/sweep", 2, "notes.txt/sweep: Not a directory"),
    ("peak --repeats 0", 2, "--repeats 0: must be >= 1"),
    ("peak --device tpu", 2, "--device tpu: choose auto|cpu|cuda|cuda:N|mps"),
    # repeat
    ("repeat digits --runs 2", 2, "--out DIR is required"),
    ("repeat digits --runs 0 --out rep", 2, "--runs 0: must be an integer >= 1"),
    ("repeat nosuch --runs 2 --out rep", 2, "unknown task 'nosuch'"),
    (f"repeat digits --runs 2 --out rep --seed-start {TOO_BIG_SEED}", 2, SEED_RANGE),
    ("repeat digits --runs 2 --out rep --seed-start -1", 2, SEED_RANGE),
    ("repeat digits --runs 2 --out rep --set lr=nan", 2, "--set lr=nan: must be a finite number"),
    ("repeat digits --runs 2 --out rep --set lr=-3", 2, "lr=-3.0: must be a number >= 0"),
    ("repeat digits --runs 2 --out notes.txt", 2, "exists and is not a directory"),
    ("repeat digits --runs 2 --out notes.txt/rep", 2, "notes.txt/rep: Not a directory"),
    # analyze
    ("analyze", 2, "the following arguments are required: ANALYSIS"),
    ("analyze threshold missing-run", 2, "missing-run: no such file or directory"),
    ("analyze threshold empty", 2, "not a run, repeat, lesion or sweep directory"),
    ("analyze threshold empty --from nan", 2, "--from nan: a fraction must be in (0, 1]"),
    ("analyze roofline missing-run", 2, "no such file or directory"),
    ("analyze scaling empty", 2, "not a run, repeat, lesion or sweep directory"),
    ("analyze score missing-run", 2, "missing-run: no such file or directory"),
    ("analyze score empty", 2, "not a run, repeat, lesion or sweep directory"),
    ("analyze score empty --by nosuch", 2, "invalid choice: 'nosuch'"),
    ("analyze score empty --r-max 1", 2, "--r-max 1.0: must be a finite number > 1"),
    ("analyze score =empty", 2, "=empty: write a labelled path as NAME=PATH"),
    # leaderboard commands that read a database never create one
    ("leaderboard show --task digits --objective train-time --db missing/lb.sqlite", 2, "no leaderboard database there"),
    ("leaderboard score --db missing/lb.sqlite", 2, "no leaderboard database there"),
    ("leaderboard score --r-max 0.5", 2, "--r-max 0.5: must be a finite number > 1"),
    ("leaderboard export site --db missing.sqlite", 2, "no leaderboard database there"),
    # lesion
    ("lesion nosuch --out les", 2, "unknown recipe 'nosuch'"),
    ("lesion digits --out les --without nosuch", 2, "recipe digits has no such switch"),
    ("lesion digits --out les --runs-per 0", 2, "--runs 0: must be an integer >= 1"),
    ("ab digits --runs 2", 2, "--out DIR is required"),
    ("ab digits --out abx --a-set nosuch=1", 2, "--set nosuch: unknown hyperparameter"),
    ("ab digits --out abx --a-cmd 'python x.py'", 2, "give --a-cmd and --b-cmd together"),
    ("ab digits --out abx --a-name same --b-name same", 2, "both arms are named 'same'"),
    ("ab digits --out abx --a-set lr=0.1 --b-set epochs=0", 2, "epochs=0: must be an integer >= 1"),
    ("ab digits --out abx --confidence 1.5", 2, "--confidence 1.5: must be a finite number >= 0.5"),
    ("ab digits --out abx --a-commit HEAD", 2, "--a-commit takes a recipe file"),
    ("repeat digits --runs 2 --out rep --resume", 2, "--resume: rep holds no experiment"),
    ("repeat digits --runs 2 --out rep --executor nowhere", 2, "--executor 'nowhere': choose one of"),
    ("run --config missing.toml", 2, "--config missing.toml: no such file"),
    ("run --config notes.txt", 2, "--config notes.txt: not valid TOML"),
    ("run --target 98", 2, "--target 98: a fraction must be in (0, 1]; for a percent write 98%"),
    ("time --task digits --target 98 --log notes.txt", 2, "for a percent write 98%"),
    ("lesion digits --out les --set momentum=-0.5", 2, "momentum=-0.5: must be a number in [0, 1)"),
    ("lesion digits --out les --seed-start 4294967296", 2, SEED_RANGE),
    ("lesion digits --out notes.txt/les", 2, "Not a directory"),
    # evaluate, compare, report, evaluate-squad
    ("evaluate missing-run", 2, "no such run directory"),
    ("evaluate empty", 2, "no result.json here"),
    ("compare empty", 2, "separate the two sides with --"),
    ("compare missing-run -- empty", 2, "missing-run: no such file or directory"),
    ("compare --alpha 2 empty -- empty", 2, "--alpha 2.0: must be between 0 and 1"),
    ("compare --alpha nan empty -- empty", 2, "'nan': must be a finite number"),
    ("report --out rep", 2, "the following arguments are required: PATH"),
    ("report missing-run --out rep", 2, "missing-run: no such file or directory"),
    ("report empty --out rep", 2, "not a run, repeat, lesion or sweep directory"),
    ("evaluate-squad missing.json bad.json", 2, "no such dataset file"),
    ("evaluate-squad bad.json bad.json", 2, "bad.json: not valid JSON"),
    ("evaluate-squad empty bad.json", 2, "cannot read the dataset file"),
    ("evaluate-squad notes.txt", 2, "the following arguments are required: PREDICTIONS.json"),
    # conflicting flags and ignored input (issue 31)
    ("run --eval-every 2 --eval-every-steps 5", 2, "--eval-every 2 and --eval-every-steps 5 are two evaluation"),
    ("repeat digits --out rep --eval-every 3 --eval-every-steps 5", 2, "are two evaluation schedules"),
    ("run --data-dir notes.txt", 2, "--data-dir notes.txt: task digits reads no data folder"),
    ("run mnist --data-dir notes.txt", 2, "--data-dir notes.txt: not a folder"),
    ("compare empty -- empty --json", 2, "--json after --: every word after -- is a run of side B"),
    ("lesion squad --out les", 2, "recipe squad_bert_base has no switches to turn off"),
    # config files and the API: the same strict types; a key of another command is named as such
    ("run --config overrides.toml", 2, "--set 5: expected a table of KEY = VALUE"),
    ("run --config yes.toml", 2, "--full-schedule yes: expected true or false"),
    ("run --config runs.toml", 2, "unknown key 'runs': that is --runs of `daybreak ab`, `daybreak lesion` and "
                                  "`daybreak repeat`"),
    ("repeat digits --out rep --config executor.toml", 2, "unknown key 'executor': that is --executor of the "
                                                          "experiment commands"),
    # several nodes: each trial spans them, the nodes in step
    ("repeat digits --runs 2 --out rep --nnodes 2", 2, "--nnodes > 1 needs --rdzv-endpoint"),
    ("lesion digits --out les --nnodes 2 --rdzv-endpoint h:29500 --node-rank 2", 2, "--node-rank 2: must be in 0..1"),
    ("ab digits --out abx --nnodes 2 --rdzv-endpoint h:29500 --until-significant 0.1", 2,
     "--until-significant decides on node 0 alone"),
    ("repeat digits --out rep --nnodes 2 --rdzv-endpoint h:29500 --parallel 2", 2, "--nnodes > 1 runs each trial"),
    # issue 40: the last tracebacks, ignored flags and misleading messages
    ("run --config latin1.toml", 2, "--config latin1.toml: not UTF-8 text (byte 0xe9 at offset"),
    ("repeat digits --out rep --config latin1.toml", 2, "--config latin1.toml: not UTF-8 text"),
    ("ab digits --out abx --a-config latin1.toml", 2, "--a-config latin1.toml: not UTF-8 text"),
    ("ab digits --out abx --b-config missing.toml", 2, "--b-config missing.toml: no such file"),
    ("ab digits --out abx --a-config runs.toml", 2, "--a-config runs.toml: unknown key 'runs'"),
    ("ab digits --out abx --runs 5 --max-runs 2 --until-significant 0.1", 2,
     "--max-runs 2 is below --runs 5: the first 5 pairs always run"),
    ("ab digits --out abx --max-runs 20", 2, "--max-runs 20 bounds --until-significant W"),
    ("ab digits --out abx --budget 600", 2, "--budget 600 bounds --until-significant W"),
    ("run --recipe empty/", 2, "--recipe empty/: is a directory; give a Python file (.py)"),
    ("run --recipe missing.py", 2, "--recipe missing.py: no such file"),
    ("run --plugin empty", 2, "--plugin empty: is a directory; give a Python file (.py)"),
    ("analyze threshold empty --step 0", 2, "--step 0: must be a number of percentage points > 0"),
    ("run --set augment=yes", 2, "--set augment=yes: expected true or false"),
    ("run --set augment=on", 2, "--set augment=on: expected true or false"),
]


def run_cli(argv: list[str]) -> int:
    """``daybreak ARGV`` in-process; argparse's own errors end in SystemExit."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    (tmp_path / "bad.json").write_text('{"runs": [1, 2')
    (tmp_path / "notes.txt").write_text("not a daybreak file\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "overrides.toml").write_text("overrides = 5\n")
    (tmp_path / "yes.toml").write_text('full_schedule = "yes"\n')
    (tmp_path / "runs.toml").write_text("runs = 5\n")
    (tmp_path / "executor.toml").write_text('executor = "slurm"\n')
    (tmp_path / "latin1.toml").write_bytes("seed = 3  # caf\u00e9\n".encode("latin-1"))  # not UTF-8
    monkeypatch.chdir(tmp_path)
    return tmp_path


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{err}"
    return lines[0]


@pytest.mark.parametrize("command,code,fragment", MISTAKES, ids=[m[0][:60] for m in MISTAKES])
def test_mistake_is_one_line_and_documented_exit_status(command, code, fragment, scratch, capsys):
    status = run_cli(shlex.split(command))
    line = one_line(capsys.readouterr().err)
    assert status == code, line
    assert fragment in line
    if code == 2:
        assert line.startswith("daybreak: error: "), line


@pytest.mark.parametrize("flags", [["--set", "lr=nan"], ["--set", "lr=-1"], ["--set", "momentum=1"],
                                   ["--seed", TOO_BIG_SEED], ["--seed", "-1"]])
def test_refused_values_never_reach_a_record(flags, scratch, capsys):
    """A refused hyperparameter or seed stops the run before anything is written (NaN once reached
    dawnbench.json and the mllog)."""
    assert run_cli(["run", "--out", "r", *flags]) == 2
    one_line(capsys.readouterr().err)
    assert not (scratch / "r").exists() and not (scratch / "runs").exists()


def test_every_command_has_a_mistake():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    covered = {shlex.split(m[0])[0] for m in MISTAKES}
    assert set(sub.choices) - covered == set()


def test_seed_bounds_are_accepted(scratch, capsys):
    """The ends of the seed range parse (a refused seed never gets as far as the recipe check)."""
    for seed in ("0", str(SEED_MAX)):
        assert run_cli(["run", "--seed", seed, "--set", "lr=-1"]) == 2
        assert "lr=-1.0" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize("name", recipe_names())
def test_recipe_defaults_obey_their_own_limits(name):
    recipe = get_recipe(name)
    hp = recipe.hyperparameters()  # raises ConfigError if a default breaks the rule
    for key, value in hp.items():
        limit = recipe.limit(key)
        if limit is not None:
            assert math.isfinite(value) and value in limit, (key, value, str(limit))


def test_hyperparameter_rule_applies_to_every_caller():
    """Not only --set: repeat/lesion templates and the Python API go through Recipe.hyperparameters too."""
    digits = get_recipe("digits")
    for overrides, fragment in [({"lr": float("nan")}, "finite"), ({"lr": -0.1}, ">= 0"),
                                ({"momentum": 1.0}, "[0, 1)"), ({"epochs": 2.0}, "expected an integer"),
                                ({"augment": 1}, "expected true or false"), ({"peak_at": 1.5}, "[0, 1]"),
                                ({"width": 0}, ">= 1"), ({"batch_size": True}, "expected an integer")]:
        with pytest.raises(ConfigError, match=None) as info:
            digits.hyperparameters(overrides)
        assert fragment in str(info.value) and "\n" not in str(info.value)
    assert digits.hyperparameters({"lr": 0, "momentum": 0.0, "peak_at": 1})["lr"] == 0  # edges are allowed
    assert parse_overrides(["lr=0.05", "epochs=3", "augment=false"], digits.defaults) == {
        "lr": 0.05, "epochs": 3, "augment": False}
    assert parse_overrides(["augment=True"], digits.defaults) == {"augment": True}  # the words, in any case


def test_oserror_on_a_path_the_user_gave_is_one_line(scratch, capsys, monkeypatch):
    """Permission denied on a path from the command line (root cannot provoke it for real): one line, exit 2.
    An OSError about any other path is a bug or the machine's problem and keeps its traceback."""
    import daybreak.train.commands as commands

    def denied(args):
        raise PermissionError(13, "Permission denied", str(args.run_dir / "result.json"))

    monkeypatch.setattr(commands, "cmd_show", denied)
    assert run_cli(["show", "some-run"]) == 2
    assert one_line(capsys.readouterr().err) == "daybreak: error: some-run/result.json: Permission denied"

    def elsewhere(args):
        raise PermissionError(13, "Permission denied", "/var/lib/daybreak/cache.json")

    monkeypatch.setattr(commands, "cmd_show", elsewhere)
    with pytest.raises(PermissionError):
        main(["show", "some-run"])
