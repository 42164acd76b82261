#!/usr/bin/env bash
# MXNet's own virtual environment for `daybreak throughput --frameworks mxnet`:
#
#   bash scripts/mxnet-venv.sh [DIR]          # DIR: default .venv-mxnet (ignored by git)
#   export DAYBREAK_MXNET_PYTHON=DIR/bin/python   # what daybreak runs mxnet_program.py with (the default is
#                                                 # .venv-mxnet/bin/python under the working directory)
#
# Why a second interpreter: mxnet 1.9.1 (its last release; PyPI's manylinux2014 CPU wheel, openblas + MKLDNN) uses
# NumPy aliases that NumPy 1.24 removed (np.bool, ...) and daybreak's environment has NumPy >= 2; NumPy 1.23.5, the
# last NumPy it runs with, has wheels for CPython 3.8-3.11 only. So: Python 3.8-3.11 (PYTHON, default the first of
# python3.11 python3.10 python3.9 python3.8 found), exactly numpy==1.23.5 and mxnet==1.9.1, and what mxnet declares
# (requests, which it imports, and graphviz), as pip resolves them; DIR/requirements.txt records the whole
# environment (pip freeze). The reference program needs nothing else: it imports throughput_log and reference from
# daybreak/sweep/frameworks, which daybreak puts on its PYTHONPATH.
#
# Idempotent: a DIR whose python already imports these versions is left as it is. Downloads ~70 MB (mxnet 49 MB,
# numpy 17 MB, requests). Each pip step is tried twice (CI: a download that fails twice leaves the environment out, and the
# MXNet tests then skip saying so); exit status 1 when it could not be made.
set -euo pipefail
cd "$(dirname "$0")/.."

DIR="${1:-.venv-mxnet}"
MXNET_VERSION=1.9.1
NUMPY_VERSION=1.23.5
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

say() { echo "mxnet-venv: $*" >&2; }

check() {  # DIR's python imports the pinned versions and can build an MXNet array
    "$1" - "$MXNET_VERSION" "$NUMPY_VERSION" <<'EOF' >/dev/null 2>&1
import sys
import mxnet, numpy
assert (mxnet.__version__, numpy.__version__) == (sys.argv[1], sys.argv[2]), (mxnet.__version__, numpy.__version__)
assert float(mxnet.nd.ones((2, 2)).sum().asscalar()) == 4.0
EOF
}

twice() {  # a command, tried a second time after a failure (a download that failed once)
    "$@" && return 0
    say "failed once, trying again: $*"
    "$@"
}

if [ -x "$DIR/bin/python" ] && check "$DIR/bin/python"; then
    say "$DIR already has mxnet $MXNET_VERSION and numpy $NUMPY_VERSION"
else
    if [ -z "${PYTHON:-}" ]; then
        for candidate in python3.11 python3.10 python3.9 python3.8; do
            if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'pass' >/dev/null 2>&1; then
                PYTHON="$candidate"; break
            fi
        done
    fi
    if [ -z "${PYTHON:-}" ]; then
        say "error: no Python 3.8-3.11 found (numpy $NUMPY_VERSION, the last NumPy mxnet $MXNET_VERSION runs with, has no wheel for newer ones): set PYTHON=/path/to/python3.11"
        exit 1
    fi
    if ! version="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)"; then
        say "error: $PYTHON does not run (set PYTHON=/path/to/python3.11)"
        exit 1
    fi
    case "$version" in
        3.8|3.9|3.10|3.11) ;;
        *) say "error: $PYTHON is Python $version: numpy $NUMPY_VERSION has wheels for Python 3.8-3.11 only (set PYTHON)"
           exit 1 ;;
    esac
    say "creating $DIR with $PYTHON (Python $version)"
    rm -rf "$DIR"
    "$PYTHON" -m venv "$DIR"
    if ! twice "$DIR/bin/pip" install -q --only-binary numpy,mxnet "numpy==$NUMPY_VERSION" "mxnet==$MXNET_VERSION"; then
        say "error: could not install numpy==$NUMPY_VERSION and mxnet==$MXNET_VERSION into $DIR"
        exit 1
    fi
    if ! check "$DIR/bin/python"; then
        say "error: $DIR/bin/python does not run mxnet $MXNET_VERSION with numpy $NUMPY_VERSION:"
        "$DIR/bin/python" -c 'import mxnet' >&2 || true
        exit 1
    fi
    "$DIR/bin/pip" freeze --all > "$DIR/requirements.txt"
fi
PY="$(cd "$DIR" && pwd)/bin/python"
"$PY" -c 'import mxnet; print("mxnet-venv: mxnet", mxnet.__version__, "features:", " ".join(f.name for f in mxnet.runtime.Features().values() if f.enabled))' >&2
echo "$PY"
