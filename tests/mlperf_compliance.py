"""Run the installed mlperf-logging compliance checker on a log, with the checks that apply to a benchmark MLPerf
does not define: every check of the ruleset's common, closed/open configs except the membership of
``submission_benchmark`` in MLPerf's own list (and the benchmark-specific config that would follow from it)."""

from __future__ import annotations

import re
from pathlib import Path

import mlperf_logging
from mlperf_logging.compliance_checker import mlp_compliance

RULESET = "6.1.0"


def _drop_benchmark_key(text: str) -> str:
    blocks = re.split(r"(?m)^(?=- KEY:|- BEGIN:|- END:)", text)
    return "".join(b for b in blocks if not re.search(r"NAME:\s+submission_benchmark\b", b))


def checker_configs(folder: Path, ruleset: str = RULESET) -> Path:
    """Copies of the ruleset's configs in ``folder`` (absolute paths, so the checker reads them); returns the
    top-level config."""
    src = Path(mlperf_logging.__file__).parent / "compliance_checker" / f"training_{ruleset}"
    folder.mkdir(parents=True, exist_ok=True)
    common = (src / "common.yaml").read_text()
    common = common.replace(f"training_{ruleset}/{{}}_common.yaml", str(folder) + "/{}_common.yaml")
    assert str(folder) in common, "the checker's common.yaml no longer enqueues {division}_common.yaml"
    (folder / "common.yaml").write_text(common)
    for division in ("closed", "open"):
        (folder / f"{division}_common.yaml").write_text(_drop_benchmark_key((src / f"{division}_common.yaml").read_text()))
    return folder / "common.yaml"


def compliance_messages(log: Path, folder: Path, ruleset: str = RULESET) -> list[str]:
    """Every message the checker has about ``log`` (empty = it passes)."""
    checker = mlp_compliance.make_checker("training", ruleset, True, False)
    mlp_compliance.enqueued_configs.clear()
    checker.check_file(str(log), str(checker_configs(folder, ruleset)))
    return [*checker.overwritable.values(), *checker.not_overwritable]
