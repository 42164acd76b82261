#!/usr/bin/env bash
# One command for a freshly lent GPU machine (no network needed): the README's set-up, then every check of the
# GPU paths in at most 10 minutes, with one JSON + Markdown summary under benchmarks/results/ named by GPU and date.
#
#   bash benchmarks/gpu_suite.sh                                  # on the GPU machine
#   bash benchmarks/gpu_suite.sh --airbench ~/airbench94.py       # also the airbench parity step
#   bash benchmarks/gpu_suite.sh --dry-run                        # on any CPU: every step resolves (the tests do)
#
# The steps are benchmarks/gpu_suite.py's (its --help). Set-up: scripts/bootstrap.sh, exactly what `make run` does
# (instant when .venv is current; it installs nothing else). DAYBREAK_SUITE_NO_BOOTSTRAP=1 skips it and PYTHON
# names the interpreter to use (the tests run the dry run with their own).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${DAYBREAK_SUITE_NO_BOOTSTRAP:-0}" != "1" ]; then
    bash scripts/bootstrap.sh
fi
exec "${PYTHON:-.venv/bin/python}" benchmarks/gpu_suite.py "$@"
