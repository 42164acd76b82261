"""The command line imports only what the command it runs needs (daybreak.commands_index), and ``daybreak --help``
still lists every command."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

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
