"""Registries by name (tasks, models, recipes), in the style of timm's ``create_model``.

A registry fills itself on first use: it imports every module of its ``package`` (each registers its entries)
and loads its entry-point group, so installed packages add tasks, models and recipes with
``[project.entry-points."daybreak.tasks"] mytask = "mypackage.mytask"`` (a module that registers when imported),
and plug-in files (``--plugin FILE``, ``DAYBREAK_PLUGINS``: daybreak.plugins) do the same without packaging.
Discovery runs once, under a lock: threads that ask while it runs (a web server's first requests) wait for the
whole registry instead of reading a half-filled one; the discovering thread itself (a module that reads the
registry while it is imported) sees what is registered so far.
Tests swap an entry with ``override`` instead of writing into private dicts.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import threading
from contextlib import contextmanager
from typing import Callable, Generic, Iterator, TypeVar

from daybreak.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, *, package: str | None = None, entry_point_group: str | None = None,
                 helpers: tuple[str, ...] = ()):
        self.kind = kind
        self.package = package
        self.helpers = frozenset(helpers)  # modules of the package that register nothing: discovery skips them
        self.entry_point_group = entry_point_group
        self._items: dict[str, T] = {}
        self._origins: dict[str, str] = {}  # name -> module that registered it
        self._discovered = package is None and entry_point_group is None
        self._discovering = False  # True while the thread holding _lock imports the modules
        self._lock = threading.RLock()
        self._replaceable: frozenset[str] = frozenset()  # names a registration may replace (``replaceable``)

    # --- filling ------------------------------------------------------------------------------------------------
    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._items and name not in self._replaceable:
                raise ValueError(f"{self.kind} {name!r} registered twice ({self._origins.get(name)} and "
                                 f"{_caller_module()})")
            self._items[name] = obj
            self._origins[name] = _caller_module()
            return obj

        return decorator

    def add(self, name: str, obj: T) -> T:
        return self.register(name)(obj)

    def discover(self) -> None:
        """Import the package's modules and the entry points, once. Another thread calling meanwhile waits until
        the registry is whole; the discovering thread's own nested calls return at once."""
        if self._discovered:
            return
        with self._lock:
            if self._discovered or self._discovering:
                return  # done by the thread we waited for; or a nested call from a module being imported
            self._discovering = True
            try:
                if self.package is not None:
                    pkg = importlib.import_module(self.package)
                    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
                        if not info.name.startswith("_") and info.name not in self.helpers:
                            importlib.import_module(f"{self.package}.{info.name}")
                if self.entry_point_group is not None:
                    self._load_entry_points(self.entry_point_group)
                    from daybreak.plugins import load_plugins

                    load_plugins()  # plug-in files (--plugin, DAYBREAK_PLUGINS) register into any registry
                self._discovered = True
            finally:
                self._discovering = False

    def _load_entry_points(self, group: str) -> None:
        from importlib.metadata import entry_points

        for ep in entry_points(group=group):
            try:
                obj = ep.load()
            except Exception as e:  # noqa: BLE001 - a broken plugin must not break daybreak
                print(f"daybreak: warning: {self.kind} plugin {ep.name!r} ({ep.value}) failed to load: "
                      f"{type(e).__name__}: {e}".splitlines()[0], file=sys.stderr)
                continue
            if not isinstance(obj, type(sys)) and ep.name not in self._items:  # an object, not a module
                self.add(ep.name, obj)

    # --- reading ------------------------------------------------------------------------------------------------
    def get(self, name: str) -> T:
        self.discover()
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "none"
            raise ConfigError(f"unknown {self.kind} {name!r}; known {self.kind}s: {known}") from None

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._items)

    def origin(self, name: str) -> str | None:
        self.discover()
        return self._origins.get(name)

    def __contains__(self, name: str) -> bool:
        self.discover()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    @contextmanager
    def replaceable(self, names: frozenset[str] | set[str]) -> Iterator[None]:
        """Inside the block, registering one of ``names`` again replaces it instead of failing (a user's recipe
        file read as it was at another commit registers the same name; each file keeps its own object)."""
        old = self._replaceable
        self._replaceable = frozenset(names)
        try:
            yield
        finally:
            self._replaceable = old

    @contextmanager
    def override(self, name: str, obj: T) -> Iterator[T]:
        """Replace (or add) one entry for the duration of a ``with`` block (tests)."""
        self.discover()
        missing = object()
        old = self._items.get(name, missing)
        self._items[name] = obj
        try:
            yield obj
        finally:
            if old is missing:
                self._items.pop(name, None)
            else:
                self._items[name] = old  # type: ignore[assignment]


def _caller_module() -> str:
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "?"
    name: str = frame.f_globals.get("__name__", "?")
    return name
