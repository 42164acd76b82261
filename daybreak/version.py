"""The package version, importable without importing anything else of daybreak.

Semantic versioning (PEP 440 spelling): CHANGELOG.md says what each version changed. ``daybreak --version`` prints
it, and every record carries it (``SystemInfo.daybreak``, ``Record.daybreak_version``). A ``.devN`` suffix marks a
checkout on its way to that version (the changelog's "Unreleased" section).
"""

__version__ = "0.5.0"
