#!/usr/bin/env bash
# The GPU suite (benchmarks/gpu_suite.py's --help says what it measures).
#
#   bash benchmarks/gpu_suite.sh --prepare [--python 3.12]        # here, with the package registries: the wheels
#                                                                 # the GPU machine lacks, into .gpu/ (<= 60 MiB;
#                                                                 # --wheels DIR: elsewhere)
#   bash benchmarks/gpu_suite.sh --offline --results "$OUT"       # on the lent GPU machine (.gpu travels with the
#                                                                 # tree): its own python3 and torch, no network
#   bash benchmarks/gpu_suite.sh --offline --dry-run --results R  # any CPU: every step at a tiny size
#   bash benchmarks/gpu_suite.sh [--airbench PATH] ...            # a GPU machine of your own, with a network:
#                                                                 # `make venv`'s set-up (.venv) first
#
# --prepare pins the versions installed in .venv (scripts/bootstrap.sh brings it up to date first; skipped with
# DAYBREAK_SUITE_NO_BOOTSTRAP=1, PYTHON then names the interpreter whose packages are pinned). --offline runs
# $PYTHON (default python3) and never bootstraps or downloads anything.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=suite
for arg in "$@"; do
    case "$arg" in
        --prepare) mode=prepare ;;
        --offline) mode=offline ;;
    esac
done

if [ "$mode" = prepare ]; then
    target=""
    wheels=""
    while [ $# -gt 0 ]; do
        case "$1" in
            --prepare) shift ;;
            --python) [ $# -ge 2 ] || { echo "gpu_suite: error: --python needs a version, e.g. 3.12" >&2; exit 2; }
                      target="$2"; shift 2 ;;
            --python=*) target="${1#--python=}"; shift ;;
            --wheels) [ $# -ge 2 ] || { echo "gpu_suite: error: --wheels needs a folder" >&2; exit 2; }
                      wheels="$2"; shift 2 ;;
            *) echo "gpu_suite: error: --prepare takes only --python VERSION and --wheels DIR, not $1" >&2
               exit 2 ;;
        esac
    done
    if [ "${DAYBREAK_SUITE_NO_BOOTSTRAP:-0}" != "1" ]; then
        bash scripts/bootstrap.sh
    fi
    exec "${PYTHON:-.venv/bin/python}" benchmarks/gpu_wheels.py prepare ${target:+--python-version "$target"} \
        ${wheels:+--dest "$wheels"}
elif [ "$mode" = offline ]; then
    py="${PYTHON:-python3}"
    command -v "$py" >/dev/null 2>&1 || { echo "gpu_suite: error: $py not found (set PYTHON)" >&2; exit 2; }
    exec "$py" benchmarks/gpu_suite.py "$@"
else
    if [ "${DAYBREAK_SUITE_NO_BOOTSTRAP:-0}" != "1" ]; then
        bash scripts/bootstrap.sh
    fi
    exec "${PYTHON:-.venv/bin/python}" benchmarks/gpu_suite.py "$@"
fi
