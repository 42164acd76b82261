"""The command line imports only what the command it runs needs (daybreak.commands_index), and ``daybreak --help``
still lists every command; a command that reads text (logs, records, the leaderboard) imports no torch, and every
command answers a mistake in a name or an argument before it imports anything heavy."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from daybreak.cli import build_parser
from daybreak.commands_index import COMMANDS, modules

WEB_STACK = ("fastapi", "starlette", "sqlalchemy", "uvicorn", "psycopg", "multipart", "submitit")


def loaded_after(code: str) -> set[str]:
    """Top-level packages and daybreak modules in sys.modules after ``code`` ran in a fresh interpreter."""
    probe = code + "\nimport json, sys\nprint('MODULES=' + json.dumps(sorted(sys.modules)))\n"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("MODULES="))
    return set(json.loads(line[len("MODULES="):]))


def test_every_module_registers_exactly_the_commands_the_table_gives_it():
    for module in modules():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(module).register(sub)
        assert set(sub.choices) == {c.name for c in COMMANDS if c.module == module}, module
        for name, action in zip(sub.choices, sub._choices_actions):
            assert action.help == next(c.help for c in COMMANDS if c.name == name)


def test_top_level_help_lists_every_command_without_importing_one(capsys):
    loaded = loaded_after("from daybreak.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass")
    assert not {m for m in loaded if m.startswith("daybreak.") and m != "daybreak.cli"} - {
        "daybreak.commands_index", "daybreak.errors", "daybreak.version"}
    with pytest.raises(SystemExit):
        build_parser(["--help"]).parse_args(["--help"])
    out = capsys.readouterr().out
    for c in COMMANDS:
        assert f"    {c.name} " in out or f"    {c.name}\n" in out, c.name


def test_a_run_loads_neither_the_web_stack_nor_the_leaderboard(tmp_path):
    loaded = loaded_after(
        "from daybreak.cli import main\n"
        f"rc = main(['run', 'digits', '--out', {str(tmp_path / 'run')!r}, '-q', '--set', 'epochs=1', "
        "'--full-schedule'])\n"
        "assert rc == 3, rc\n")
    assert "torch" in loaded and "daybreak.train.runner" in loaded  # it did run
    tops = {m.split(".")[0] for m in loaded}
    assert not tops & set(WEB_STACK)
    assert not {m for m in loaded if m.startswith(("daybreak.leaderboard", "daybreak.analysis",
                                                    "daybreak.experiments"))}


@pytest.mark.parametrize("command", ["run", "infer", "throughput", "peak", "time"])
def test_the_gpu_commands_help_imports_no_web_stack(command):
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "daybreak", command, "--help"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.count("|") >= 2}
    assert "daybreak.cli" in imported  # importtime did report
    assert not {m.split(".")[0] for m in imported} & set(WEB_STACK), sorted(imported)


def test_an_unknown_command_is_one_line_naming_the_choices(capsys):
    from daybreak.cli import main

    with pytest.raises(SystemExit) as e:
        main(["rnu"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "invalid choice: 'rnu'" in err and "'run'" in err and "'leaderboard'" in err


# --- commands that read text import no torch; a mistake is answered before anything heavy is imported ------------
# The heavy packages a command may load, and exactly which each text command loads (fresh interpreters, inputs
# written here: an MLPerf log in the published layout, a daybreak task's log, the records `time --log` makes of it).
HEAVY = ("torch", "numpy", "scipy", "matplotlib", "PIL", "sqlalchemy", "jinja2", "yaml", "mlperf_logging",
         *WEB_STACK)


def in_fresh_process(argv: list[str]) -> tuple[int, str, set[str]]:
    """(exit status, stderr, top-level packages loaded) of `daybreak ARGV` in a fresh interpreter."""
    code = ("import json, sys\nfrom daybreak.cli import main\ntry:\n    rc = main(sys.argv[1:])\n"
            "except SystemExit as e:\n    rc = e.code\n"
            "print('LOADED=' + json.dumps([rc, sorted({m.split('.')[0] for m in sys.modules})]))\n")
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=300)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("LOADED=")), None)
    assert line is not None, proc.stderr[-2000:]
    rc, loaded = json.loads(line[len("LOADED="):])
    return rc, proc.stderr, set(loaded)


@pytest.fixture(scope="module")
def text_inputs(tmp_path_factory):
    from test_mlperf_benchmarks import T0, published_log, write

    from daybreak.cli import main

    base = tmp_path_factory.mktemp("text")
    for i in range(10):
        log = write(base, "v5.0", "rgat", published_log("rgat", [(120.0, 0.701, 1), (240.5 + i, 0.7214, 2)],
                                                        stop_s=241.0 + i), f"result_{i}.txt")
    root = base / "training_results_v5.0"
    (root / "Acme" / "systems").mkdir()
    (root / "Acme" / "systems" / "acme_1x8.json").write_text(json.dumps({
        "submitter": "Acme", "division": "closed", "status": "available", "system_name": "acme_1x8",
        "number_of_nodes": "1", "accelerators_per_node": "8", "accelerator_model_name": "Acme X1",
        "framework": "PyTorch 2.6.0"}))

    def record(key, value, t, et="POINT_IN_TIME", **md):
        return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": t, "event_type": et, "key": key, "value": value,
                                         "metadata": md})

    runs = []
    for k, speed in enumerate((1.0, 1.1, 0.9)):  # a daybreak task's log, and its record (`time --log`)
        lines = [record("submission_benchmark", "daybreak_digits", T0), record("seed", k, T0),
                 record("init_start", None, T0, "INTERVAL_START"), record("init_stop", None, T0 + 1000, "INTERVAL_END"),
                 record("run_start", None, T0 + 1000, "INTERVAL_START")]
        for e in range(1, 6):
            t = T0 + 1000 + int(e * 2000 * speed)
            lines += [record("eval_start", None, t - 200, "INTERVAL_START", epoch_num=e),
                      record("eval_accuracy", 0.9 + e * 0.02, t, epoch_num=e),
                      record("eval_stop", None, t, "INTERVAL_END", epoch_num=e)]
        lines.append(record("run_stop", None, T0 + 1000 + int(10000 * speed) + 10, "INTERVAL_END", status="success"))
        (base / f"digits{k}.txt").write_text("\n".join(lines) + "\n")
        assert main(["time", "--log", str(base / f"digits{k}.txt"), "--out", str(base / f"run{k}"), "-q"]) == 0
        runs.append(str(base / f"run{k}"))
    db = str(base / "lb.sqlite")
    return {"mlperf_log": str(log), "tree": str(root), "daybreak_log": str(base / "digits0.txt"), "runs": runs,
            "db": db, "base": base}


TEXT_COMMANDS = {  # name: (argv, the heavy packages it loads)
    "time --log (an MLPerf benchmark's log)": (["time", "--rules", "mlperf", "--log", "{mlperf_log}", "--out",
                                               "{out}", "-q"], {"mlperf_logging"}),
    "time --log (a daybreak task's log)": (["time", "--log", "{daybreak_log}", "--out", "{out}", "-q"],
                                           {"mlperf_logging"}),
    "check-mllog": (["check-mllog", "{mlperf_log}"], {"mlperf_logging", "yaml"}),
    # the RCP check is mlperf-logging's rcp_checker, which computes with numpy and scipy
    "leaderboard import-mlperf": (["leaderboard", "import-mlperf", "{tree}", "--db", "{db}"],
                                  {"mlperf_logging", "numpy", "scipy", "sqlalchemy"}),
    "leaderboard show": (["leaderboard", "show", "--task", "mlperf-rgat", "--objective", "train-time", "--db",
                          "{db}"], {"sqlalchemy"}),
    "leaderboard score": (["leaderboard", "score", "--db", "{db}"], {"sqlalchemy"}),
    "leaderboard export": (["leaderboard", "export", "{out}", "--db", "{db}"], {"sqlalchemy", "jinja2"}),
    "show": (["show", "{run0}"], set()),
    "analyze threshold": (["analyze", "threshold", "{run0}", "{run1}", "--out", "{out}"],
                          {"numpy", "matplotlib", "PIL"}),
    "compare": (["compare", "{run0}", "--", "{run1}", "{run2}"], {"numpy", "scipy"}),
    "report": (["report", "{run0}", "{run1}", "--out", "{out}", "--no-roofline"], {"numpy", "matplotlib", "PIL"}),
}


@pytest.mark.parametrize("name", list(TEXT_COMMANDS))
def test_a_command_that_reads_text_loads_no_torch(name, text_inputs):
    argv, heavy = TEXT_COMMANDS[name]
    if "{db}" in argv and name != "leaderboard import-mlperf" and not Path(text_inputs["db"]).exists():
        # the boards read what import-mlperf stored
        assert in_fresh_process(["leaderboard", "import-mlperf", text_inputs["tree"], "--db", text_inputs["db"]])[0] == 0
    out = text_inputs["base"] / f"out-{len(list(text_inputs['base'].glob('out-*')))}"
    values = {**text_inputs, "out": str(out), **{f"run{i}": r for i, r in enumerate(text_inputs["runs"])}}
    rc, err, loaded = in_fresh_process([a.format(**values) for a in argv])
    assert rc == 0, err[-2000:]
    assert {m for m in loaded if m in HEAVY} == heavy, (name, sorted(loaded & set(HEAVY)))


def test_time_log_under_importtime_imports_no_torch(text_inputs):
    """The issue's own check: `python -X importtime -m daybreak time --log F` (3 s of CPU went to torch)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "daybreak", "time", "--rules", "mlperf", "--log",
                           text_inputs["mlperf_log"], "--out", str(text_inputs["base"] / "importtime"), "-q"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.count("|") >= 2}
    assert "daybreak.external.timer" in imported and "daybreak.external.mllog_analysis" in imported
    assert not {m for m in imported if m.split(".")[0] in ("torch", "numpy")}


@pytest.mark.parametrize("argv, message", [
    (["run", "nosuchtask"], "unknown task 'nosuchtask'"),
    (["run", "digits", "--seed", "-5"], "--seed -5: a seed must be an integer"),
    (["run", "digits", "--device", "tpu9"], "--device tpu9: choose"),
    (["repeat", "nosuchtask"], "unknown task 'nosuchtask'"),
    (["ab", "nosuchtask"], "unknown task 'nosuchtask'"),
    (["infer", "{missing}"], "no such run directory"),
    (["infer", "{run0}"], "a `daybreak time` record of an external program has no daybreak model"),
    (["infer", "{run0}", "--batch-size", "0"], "--batch-size 0: must be >= 1"),
    (["evaluate", "{run0}"], "a `daybreak time` record of an external program has no daybreak model"),
    (["peak", "--repeats", "0"], "--repeats 0: must be >= 1"),
    (["time", "--task", "nosuchtask", "--", "true"], "unknown task 'nosuchtask'"),
    (["time", "--log", "{missing}"], "cannot read it"),
    (["check-mllog", "{missing}"], "no such file or run directory"),
    (["leaderboard", "show", "--task", "nosuch", "--objective", "train-time", "--db", "{db}"],
     "unknown leaderboard task 'nosuch'"),
])
def test_a_mistake_is_answered_before_torch_is_imported(argv, message, text_inputs):
    """Names and arguments are checked before anything heavy is imported: `daybreak run nosuchtask` answers in a
    fraction of a second, not after 3 s of importing torch. (A recipe's or a model's name is known only from its
    registry, whose files build torch models: those are checked after torch.)"""
    if "{db}" in argv and not Path(text_inputs["db"]).exists():
        assert in_fresh_process(["leaderboard", "import-mlperf", text_inputs["tree"], "--db", text_inputs["db"]])[0] == 0
    values = {**text_inputs, "missing": str(text_inputs["base"] / "missing"),
              **{f"run{i}": r for i, r in enumerate(text_inputs["runs"])}}
    rc, err, loaded = in_fresh_process([a.format(**values) for a in argv])
    assert rc == 2 and message in err and err.strip().count("\n") == 0, err[-2000:]
    assert "torch" not in loaded, argv
