"""Plug-in files: a task (with its reader, model and recipe) from one Python file, without packaging metadata.

``daybreak --plugin path/to/my_task.py COMMAND ...`` (the flag may stand anywhere before a ``--``, and repeat) or
``DAYBREAK_PLUGINS=path/a.py:path/b.py`` (``os.pathsep``-separated) names files that register into daybreak's
registries when imported (``TASKS.add(...)``, ``MODELS.register(...)``, ``RECIPES.add(...)``). Each registry
imports them the first time it is read (daybreak.registry.Registry.discover), after its own package and its entry
points. ``--plugin`` adds the files to ``DAYBREAK_PLUGINS`` (by absolute path), so every process daybreak starts
for the command (a trial of an experiment, a torchrun worker, a sweep worker, a Slurm job) loads them too.

Installed packages keep using entry points (``[project.entry-points."daybreak.tasks"]``); a plug-in file is for a
task that lives in one file of its own.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from daybreak.errors import ConfigError

ENV = "DAYBREAK_PLUGINS"
FLAG = "--plugin"

_loaded: dict[str, ModuleType] = {}  # absolute path -> its module, each file imported once per process
_loading: set[str] = set()


def files_from_env() -> list[Path]:
    return [Path(p) for p in os.environ.get(ENV, "").split(os.pathsep) if p.strip()]


def load_plugins() -> list[ModuleType]:
    """Import every file named by DAYBREAK_PLUGINS that this process has not imported yet (a registry calls this
    when it fills itself). A missing file or one that raises is one ConfigError line naming it."""
    modules = []
    for path in files_from_env():
        modules.append(load_file(path))
    return modules


def load_file(path: Path, where: str = ENV) -> ModuleType:
    file = path.expanduser().resolve()
    key = str(file)
    if key in _loaded:
        return _loaded[key]
    if key in _loading:  # the file itself reads a registry while it is being imported
        return sys.modules[_module_name(file)]
    if not file.is_file():
        raise ConfigError(f"{where} {path}: {not_a_file(file)}")
    if file.suffix != ".py":
        raise ConfigError(f"{where} {path}: not a Python file (.py)")
    _loading.add(key)
    try:
        module = import_file(file, _module_name(file), where)
    finally:
        _loading.discard(key)
    _loaded[key] = module
    return module


def not_a_file(file: Path) -> str:
    """Why a Python file the user named cannot be read, in words: a folder, or nothing there."""
    if file.is_dir():
        return "is a directory; give a Python file (.py)"
    return "no such file" if not file.exists() else "not a regular file; give a Python file (.py)"


def import_file(file: Path, module_name: str, where: str) -> ModuleType:
    """Import the user's Python file ``file`` (absolute) as ``module_name``, in ``sys.modules`` while it runs and
    after (so that pickles find it); anything it raises is one ConfigError line, ``WHERE FILE:LINE: Type: message``
    (a plug-in file here, a recipe file in daybreak.train.spec), and leaves nothing in ``sys.modules``."""
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{where} {file}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except ConfigError:
        sys.modules.pop(module_name, None)
        raise
    except Exception as e:  # noqa: BLE001 - the user's code: one line, the file and the line
        sys.modules.pop(module_name, None)
        line = None
        tb = e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == str(file):
                line = tb.tb_lineno
            tb = tb.tb_next
        text = str(e).splitlines()[0] if str(e) else ""
        raise ConfigError(f"{where} {file}{f':{line}' if line else ''}: {type(e).__name__}: {text}") from None
    return module


def _module_name(file: Path) -> str:
    digest = hashlib.sha256(str(file).encode()).hexdigest()[:12]
    stem = "".join(c if c.isalnum() else "_" for c in file.stem)
    return f"daybreak_plugin_{stem}_{digest}"


def take_plugin_flags(argv: list[str]) -> list[str]:
    """``argv`` without its ``--plugin FILE`` / ``--plugin=FILE`` (before a ``--``), whose files are added to
    DAYBREAK_PLUGINS (absolute paths; checked to exist) and imported. A --plugin without a file is one line."""
    out: list[str] = []
    files: list[Path] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            out += argv[i:]
            break
        if token == FLAG or token.startswith(FLAG + "="):
            value = token.split("=", 1)[1] if "=" in token else (argv[i + 1] if i + 1 < len(argv) else "")
            if not value or (value.startswith("-") and "=" not in token):
                raise ConfigError(f"{FLAG} needs a file: {FLAG} path/to/my_task.py")
            files.append(Path(value))
            i += 1 if "=" in token else 2
            continue
        out.append(token)
        i += 1
    if files:
        add_files(files)
    return out


def add_files(files: list[Path]) -> None:
    """Name ``files`` in DAYBREAK_PLUGINS for this process and its children, and import them now."""
    known = [str(p) for p in files_from_env()]
    for f in files:
        resolved = f.expanduser().resolve()
        if not resolved.is_file():
            raise ConfigError(f"{FLAG} {f}: {not_a_file(resolved)}")
        if str(resolved) not in known:
            known.append(str(resolved))
    os.environ[ENV] = os.pathsep.join(known)
    for f in files:
        load_file(f, FLAG)
