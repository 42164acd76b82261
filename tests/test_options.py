"""One declaration per option: RunConfig's options generate every command's flags, the TOML file format and the
Python API, so they read every value the same way."""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import pytest

import daybreak
from conftest import single_line
from doc_pages import bash_commands, section
from daybreak.cli import build_parser, main
from daybreak.config import RunConfig
from daybreak.errors import ConfigError
from daybreak.options import load_toml, parse_target, to_toml
from daybreak.records.run import RunResult

PKG = Path(daybreak.__file__).parent
ROOT = PKG.parent


def _add_argument_flags() -> dict[str, list[str]]:
    """Every string flag passed to an ``add_argument`` call in the package, with where it is."""
    found: dict[str, list[str]] = {}
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                        found.setdefault(arg.value, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


# The same flag name with another meaning: a throughput sweep's --amp and --compile are lists of values to sweep
# (off,bf16), not one run's setting; the leaderboard's --task picks a board (or the task of imported files).
# --out of an analysis, a sweep or an experiment is that command's output folder, not a run directory.
# The reference programs of `throughput --frameworks` (daybreak/sweep/frameworks/) are stand-alone programs of
# other frameworks, with a command line of their own (daybreak fills it from its settings): not daybreak's options.
FRAMEWORK_PROGRAMS = "daybreak/sweep/frameworks/"
OTHER_MEANING = {"--amp": ("daybreak/sweep/commands.py", FRAMEWORK_PROGRAMS),
                 "--compile": ("daybreak/sweep/commands.py", FRAMEWORK_PROGRAMS), "--threads": (FRAMEWORK_PROGRAMS,),
                 "--task": ("daybreak/leaderboard/commands.py",),
                 # analyze score reads one of the two clocks every record holds (RunConfig's reader checks it)
                 "--rules": ("daybreak/analysis/commands.py",),
                 "--out": ("daybreak/analysis/commands.py", "daybreak/sweep/commands.py", "daybreak/sweep/peak.py",
                           "daybreak/leaderboard/commands.py"),
                 # the peak worker's own command line (python -m daybreak.sweep.peak), started by daybreak itself
                 "--device": ("daybreak/sweep/peak.py", FRAMEWORK_PROGRAMS)}


def test_every_run_option_is_declared_once():
    """No command declares a run option's flag by hand: they are all generated from RunConfig (options.py's
    generator holds the only add_argument calls that make them)."""
    flags = _add_argument_flags()
    hand_made = {opt.flag: [where for where in flags.get(opt.flag, []) if not where.startswith("daybreak/options.py")
                            and not where.startswith(OTHER_MEANING.get(opt.flag, ("-",)))]
                 for opt in RunConfig.options().values()}
    assert {flag: where for flag, where in hand_made.items() if where} == {}


@pytest.mark.parametrize("command", ["run", "repeat", "lesion", "ab"])
def test_experiments_take_every_run_option(command):
    """repeat/lesion/ab accept every option `daybreak run` accepts (their trials are runs; --nnodes, --node-rank
    and --rdzv-endpoint included): the parsers, diffed, differ by nothing but --out, which names the experiment's
    directory there (ExperimentConfig's --out)."""
    assert set(RunConfig.options_of("run")) - set(RunConfig.options_of(command)) <= {"out"}
    subs = next(a for a in build_parser()._actions if a.dest == "command").choices

    def flags(name: str) -> set[str]:
        return {s for a in subs[name]._actions for s in a.option_strings}

    assert flags("run") - flags(command) == set()
    for name in RunConfig.options_of(command):
        assert RunConfig.options()[name].flag in flags(command) or name == "task"


@pytest.mark.parametrize("argv", [
    ["run", "--target", "{t}", "--set", "epochs=1", "-q"],
    ["repeat", "digits", "--target", "{t}", "--runs", "1", "--set", "epochs=1", "-q"],
    ["lesion", "digits", "--target", "{t}", "--runs", "1", "--without", "", "--set", "epochs=1", "-q"],
    ["ab", "digits", "--target", "{t}", "--runs", "1", "--set", "epochs=1", "-q"],
])
def test_a_target_means_the_same_on_every_command(argv, tmp_path):
    """0.98 and 98% are the same target everywhere; a bare 98 is refused everywhere with the same hint."""
    parser = build_parser()
    for text in ("0.98", "98%"):
        args = parser.parse_args([a.replace("{t}", text) for a in argv])
        from daybreak.options import from_args

        command = argv[0]
        assert from_args(RunConfig, args, command).target == pytest.approx(0.98)
    assert parse_target("98%") == parse_target("0.98") == pytest.approx(0.98)


def test_a_bare_number_above_one_is_refused_on_every_target_flag(tmp_path, capsys):
    for argv in (["run", "--target", "98"], ["repeat", "--target", "98", "--runs", "1", "--out", str(tmp_path / "r")],
                 ["ab", "--target", "98", "--out", str(tmp_path / "a")],
                 ["time", "--task", "digits", "--target", "98", "--log", "x"],
                 ["analyze", "threshold", str(tmp_path), "--from", "96"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert single_line(err) and "%" in err, (argv, err)
    mllog = tmp_path / "m.log"
    mllog.write_text("")
    main(["time", "--task", "digits", "--target", "96%", "--log", str(mllog), "--out", str(tmp_path / "t")])
    assert "--target" not in capsys.readouterr().err  # 96% is read; whatever else the empty log causes


def test_config_file_flags_override_it_and_unknown_keys_name_the_nearest(tmp_path, capsys):
    f = tmp_path / "run.toml"
    f.write_text('task = "digits"\nseed = 4\ntarget = "97%"\nthreads = 1\n[overrides]\nepochs = 2\n')
    from daybreak.options import from_args

    args = build_parser().parse_args(["run", "--config", str(f), "--seed", "5", "--set", "lr=0.2"])
    c = from_args(RunConfig, args, "run")
    assert (c.seed, c.target, c.threads) == (5, 0.97, 1)  # the flag wins over the file
    assert c.overrides == {"epochs": 2, "lr": "0.2"}  # --set merges key by key (text typed at resolution)
    f.write_text("sead = 3\n")
    assert main(["run", "--config", str(f)]) == 2
    err = capsys.readouterr().err
    assert single_line(err) and "unknown key 'sead'; did you mean 'seed'?" in err
    f.write_text("seed = -1\n")
    assert main(["run", "--config", str(f)]) == 2
    assert "--seed -1: a seed must be" in capsys.readouterr().err


def test_a_run_reproduces_from_its_own_config_toml(tmp_path, capsys):
    recipe = ROOT / "examples" / "recipes" / "digits_wide.py"
    first = tmp_path / "first"
    assert main(["run", "digits", "--recipe", str(recipe), "--seed", "7", "--set", "epochs=2", "--full-schedule",
                 "--target", "90%", "--threads", "1", "--out", str(first), "-q"]) in (0, 3)
    config = first / "config.toml"
    values = load_toml(config, RunConfig)
    assert values["seed"] == 7 and values["recipe"] == str(recipe.resolve()) and len(values["recipe_sha256"]) == 64
    assert values["overrides"]["epochs"] == 2 and "out" not in values and "quiet" not in values
    again = tmp_path / "again"
    assert main(["run", "--config", str(config), "--out", str(again), "-q"]) in (0, 3)
    a, b = RunResult.load(first), RunResult.load(again)
    assert (a.seed, a.recipe, a.hyperparameters, a.target) == (b.seed, b.recipe, b.hyperparameters, b.target)
    assert a.context.recipe_sha256 == b.context.recipe_sha256 is not None
    assert [h.accuracy for h in a.history] == [h.accuracy for h in b.history]  # same seed, same data order
    # a changed recipe file is refused by the pinned SHA-256
    changed = tmp_path / "changed.toml"
    copy = tmp_path / "recipe.py"
    copy.write_text(recipe.read_text() + "\n# edited\n")
    changed.write_text(config.read_text().replace(str(recipe.resolve()), str(copy)))
    capsys.readouterr()
    assert main(["run", "--config", str(changed), "--out", str(tmp_path / "c"), "-q"]) == 2
    assert "SHA-256 differs" in capsys.readouterr().err


def test_toml_round_trip_of_every_option():
    c = RunConfig(task="digits", seed=3, target="97%", data_dir="~/d", overrides={"lr": 0.5, "augment": False},
                  amp="bf16", threads=2, cost_per_hour=1.5, author="é \"x\"")
    text = to_toml(c.model_dump(), RunConfig, ["header"])
    import tomllib

    back = RunConfig(**tomllib.loads(text))
    assert back.model_dump() == {**c.model_dump(), "command": []}


def test_python_api_mistakes_are_one_config_error():
    with pytest.raises(ConfigError, match="unknown option 'sead'; did you mean 'seed'"):
        daybreak.run(sead=3)
    with pytest.raises(ConfigError, match="--target 98: a fraction must be in"):
        daybreak.RunConfig(target=98)
    with pytest.raises(ConfigError, match="unknown option 'warmpu'"):
        daybreak.infer("nowhere", warmpu=3)
    with pytest.raises(ConfigError, match="--device tpu"):
        daybreak.infer("nowhere", device="tpu")


def test_readme_python_api_section_runs(tmp_path, monkeypatch):
    """The notebook example of the docs' Python API page (the README's section "The Python API" until 0.5.0),
    executed as written (in a scratch folder)."""
    page, text = section("The Python API")
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block, f"{page}: the Python API section has a python block"
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(compile(block.group(1), str(page), "exec"), names)  # noqa: S102 - our own documentation
    # it does what its comments say: the run reaches its target, both repeats reach 90%, 2 pairs cannot tell
    assert names["result"].status == "reached" and names["result"].clocks["mlperf"].time_to_target_s
    assert names["summary"].n_reached == 2 and names["summary"].accuracy.mean >= 0.9
    time = names["ab"].comparison.time
    assert time.verdict == "not distinguishable" and time.pairs_needed and time.pairs_needed[0].effect == 0.05


def _examples() -> list[str]:
    """Every `daybreak ...` command line of the documentation's bash blocks (README.md and docs/**/*.md) and of
    every --help epilog."""
    lines = [ln for ln in bash_commands() if ln.startswith("daybreak ") and " [" not in ln]
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for p in sub.choices.values():
        for ln in (p.epilog or "").splitlines():
            if ln.strip().startswith("daybreak "):
                lines.append(ln.strip())
    return sorted({ln.split("  #", 1)[0].split(" # ", 1)[0].strip() for ln in lines})


@pytest.mark.parametrize("example", _examples())
def test_every_documented_example_parses_and_its_options_check(example):
    """Each example's flags exist and every run option in it is a valid value (the `--target 98` example of
    `daybreak time --help` drifted once). Examples that need data, a GPU or a cluster are not run here."""
    from daybreak.options import values_for

    argv = shlex.split(example, comments=True)[1:]
    if "--" in argv:
        argv = argv[:argv.index("--") + 1] + ["true"]
    args = build_parser().parse_args(argv)
    command = argv[0] if argv else ""
    if command in {"run", "repeat", "lesion", "ab", "time", "infer", "throughput", "peak", "evaluate", "instances"}:
        values_for(RunConfig, args, command)


def test_help_prints_no_default_twice():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        text = p.format_help()
        for line in re.split(r"\n  (?=-)", text):
            assert line.count("(default") <= 1, (name, line)


def test_instances_and_tasks_and_recipes_print_json(capsys):
    assert main(["tasks", "--json"]) == 0
    tasks = json.loads(capsys.readouterr().out)
    assert {t["name"] for t in tasks} >= {"digits", "mnist", "cifar10", "imagenet", "squad"}
    assert main(["recipes", "digits", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hyperparameters"]["epochs"] >= 1
    assert main(["instances", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["note"] and all(i["usd_per_hour"] > 0 for i in data["instances"])
    assert main(["instances"]) == 0
    assert "note: On-demand list prices" in capsys.readouterr().out


@pytest.mark.slow
def test_readme_tiny_mnist_example_reaches_its_target(tmp_path, monkeypatch):
    """The synthetic-MNIST example of the section "Tasks" (docs/concepts/tasks-and-recipes.md), run as written (it
    once stopped at 84% and exited 3)."""
    _, text = section("Tasks")
    block = next(b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "write_mnist" in b)
    monkeypatch.chdir(tmp_path)
    lines = [ln.split("  #")[0].strip() for ln in block.strip().splitlines()]
    assert lines[0].startswith("python -c ")
    exec(shlex.split(lines[0])[2], {})  # noqa: S102 - our own documentation
    assert main(shlex.split(lines[1])[1:] + ["--out", "r", "-q"]) == 0
    assert RunResult.load(tmp_path / "r").reached


@pytest.mark.parametrize("example", ["daybreak tasks", "daybreak recipes", "daybreak instances", "daybreak run"])
def test_cheap_examples_run(example, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(example)[1:]) == 0
    assert capsys.readouterr().out.strip()
