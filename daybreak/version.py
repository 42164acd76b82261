"""The package version, importable without importing anything else of daybreak."""

__version__ = "0.1.0"
