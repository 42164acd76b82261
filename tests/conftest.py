import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Tests never touch the user's cache or database, and never download."""
    root = tmp_path_factory.mktemp("daybreak-home")
    monkeypatch.setenv("DAYBREAK_DATA", str(root / "data"))
    monkeypatch.setenv("DAYBREAK_CACHE", str(root / "cache"))
    monkeypatch.setenv("DAYBREAK_DB", f"sqlite:///{root / 'leaderboard.sqlite'}")
    yield


def single_line(text: str) -> bool:
    text = text.strip()
    return bool(text) and "\n" not in text and "Traceback" not in text
