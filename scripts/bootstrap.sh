#!/usr/bin/env bash
# Set up the project-local virtual environment .venv/ that `make run` and `make test` use:
#
#   1. create .venv with python3 (3.10 or newer) if it is not there;
#   2. give it a PyTorch build that suits this machine, chosen before anything else can pull one in:
#        - an NVIDIA GPU is visible (`nvidia-smi -L` works): PyPI's default torch, which on Linux x86_64 is
#          the CUDA build;
#        - otherwise a CPU-only build, never a CUDA one. The candidates, first that works wins:
#            a. the CPU torch already in .venv;
#            b. PyTorch's CPU index (https://download.pytorch.org/whl/cpu);
#            c. torch==$TESTED_TORCH from pip's configured sources (e.g. a local CPU wheel).
#          Each candidate is resolved first with `pip install --dry-run --report` and refused if the
#          resolution holds a CUDA torch (+cuXXX) or any nvidia-*, cuda-* or triton package.
#        - DAYBREAK_TORCH (a requirement, e.g. "torch==2.13.0+cpu") and/or DAYBREAK_TORCH_INDEX (an index URL,
#          e.g. https://download.pytorch.org/whl/cu126) override the choice: that is installed as given.
#   3. install daybreak editable with its test, loadgen and slurm extras, with torch held at the version now installed
#      (so no dependency can swap it for another build); the test extra pulls the leaderboard, docs and release
#      extras, everything `make test`, `make docs` and CI's wheel check need (`pip install daybreak` alone is the
#      lean core: see docs/getting-started/install.md);
#   4. check that torch imports (and on a machine without an NVIDIA GPU that it is a CPU build).
#
# Idempotent: when .venv was set up from the same pyproject.toml, version, this script and the same choices, it returns
# at once (the stamp file .venv/.daybreak-bootstrap). To start over, `rm -rf .venv`.
# Environment: PYTHON (default python3), DAYBREAK_TORCH, DAYBREAK_TORCH_INDEX.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
PY="$VENV/bin/python"
PYTHON="${PYTHON:-python3}"
TESTED_TORCH=2.13.0              # the PyTorch release daybreak is tested with
CPU_INDEX=https://download.pytorch.org/whl/cpu
STAMP="$VENV/.daybreak-bootstrap"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

say() { echo "bootstrap: $*" >&2; }
die() { echo "bootstrap: error: $*" >&2; exit 1; }

if nvidia-smi -L >/dev/null 2>&1; then GPU=nvidia; else GPU=none; fi

command -v "$PYTHON" >/dev/null 2>&1 \
    || die "$PYTHON not found; install Python 3.10 or newer (or set PYTHON=/path/to/python3)"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$("$PYTHON" -V 2>&1) is too old: daybreak needs Python 3.10 or newer (set PYTHON=/path/to/python3.x)"

# What the environment was made from: when nothing changed, there is nothing to do.
KEY="$("$PYTHON" - "$0" "$GPU" "${DAYBREAK_TORCH:-}" "${DAYBREAK_TORCH_INDEX:-}" <<'EOF'
import hashlib, sys
h = hashlib.sha256()
for name in ("pyproject.toml", "daybreak/version.py", sys.argv[1]):  # a new version: the metadata again
    with open(name, "rb") as f:
        h.update(f.read())
h.update("\0".join(sys.argv[2:]).encode())
print(h.hexdigest())
EOF
)"
if [ -x "$PY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$KEY" ]; then
    exit 0
fi

# --- 1. the virtual environment ---------------------------------------------------------------------------------
if [ -x "$PY" ] && ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' >/dev/null 2>&1; then
    say "$VENV is broken or too old; recreating it"
    "$PYTHON" -m venv --clear "$VENV" || die "cannot recreate $VENV"
elif [ ! -x "$PY" ]; then
    say "creating $VENV with $("$PYTHON" -V 2>&1)"
    "$PYTHON" -m venv "$VENV" \
        || die "cannot create $VENV with $PYTHON -m venv (Debian/Ubuntu: apt-get install python3-venv)"
fi
rm -f "$STAMP"
PIP=("$PY" -m pip)
if ! "$PY" -c 'import sys, pip; sys.exit(tuple(map(int, pip.__version__.split(".")[:2])) < (22, 2))' 2>/dev/null; then
    say "upgrading pip in $VENV (pip install --dry-run --report needs pip 22.2 or newer)"
    "${PIP[@]}" install --quiet --upgrade "pip>=22.2" || die "cannot upgrade pip in $VENV"
fi

# --- 2. PyTorch ---------------------------------------------------------------------------------------------------
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

installed_torch() {  # prints "VERSION cpu" or "VERSION cuda" for the torch in .venv; fails if there is none
    "$PY" -c 'import torch; print(torch.__version__.split("+")[0], "cuda" if torch.version.cuda else "cpu")' 2>/dev/null
}

# CPU-only candidate: LABEL REQUIREMENT [pip source options...]. Resolves it without installing anything, refuses a
# resolution with CUDA packages, else installs exactly the torch version it resolved, from the same sources.
try_cpu() {
    local label="$1" req="$2"; shift 2
    local report="$TMP/report.json" log="$TMP/pip.log" found version
    say "trying $label"
    if ! "${PIP[@]}" install --dry-run --quiet --report "$report" "$@" "$req" >"$log" 2>&1; then
        say "  not available: $(grep -v -i 'warning' "$log" | grep . | tail -1)"
        return 1
    fi
    # -> "ok VERSION FROM" (VERSION empty: already satisfied) or "refused WHY"
    found="$("$PY" - "$report" <<'EOF'
import json, sys
cuda, torch = [], "ok"
for item in json.load(open(sys.argv[1])).get("install", []):
    name = item["metadata"]["name"].lower().replace("_", "-")
    version = item["metadata"]["version"]
    if name == "torch":
        torch = f"ok {version} {item.get('download_info', {}).get('url', '?').rsplit('/', 1)[0]}/"
    if name.startswith(("nvidia-", "cuda-")) or "triton" in name or (name == "torch" and "+cu" in version):
        cuda.append(f"{name} {version}")
if cuda:
    print("refused: it would install a CUDA build (" + ", ".join(cuda[:3]) + (", ..." if len(cuda) > 3 else "") + ")")
else:
    print(torch)
EOF
)"
    if [ "${found%% *}" != ok ]; then
        say "  $found"
        return 1
    fi
    found="${found#ok}"; found="${found# }"; version="${found%% *}"
    say "  installing torch ${version:-(already satisfied)} (a CPU build${version:+, from ${found#* }})"
    if ! "${PIP[@]}" install --quiet "$@" "${version:+torch==}${version:-$req}" >"$log" 2>&1; then
        cat "$log" >&2
        die "installing torch from $label failed (see pip's messages above)"
    fi
}

if [ -n "${DAYBREAK_TORCH:-}${DAYBREAK_TORCH_INDEX:-}" ]; then
    say "installing ${DAYBREAK_TORCH:-torch}${DAYBREAK_TORCH_INDEX:+ from $DAYBREAK_TORCH_INDEX} (as DAYBREAK_TORCH* say)"
    "${PIP[@]}" install --quiet ${DAYBREAK_TORCH_INDEX:+--index-url "$DAYBREAK_TORCH_INDEX"} \
        "${DAYBREAK_TORCH:-torch}" \
        || die "cannot install ${DAYBREAK_TORCH:-torch}${DAYBREAK_TORCH_INDEX:+ from $DAYBREAK_TORCH_INDEX}"
elif [ "$GPU" = nvidia ]; then
    have="$(installed_torch || true)"
    if [ "${have#* }" = cuda ]; then
        say "an NVIDIA GPU is visible; keeping the CUDA build torch ${have% *} in $VENV"
    else
        if [ -n "$have" ]; then
            say "an NVIDIA GPU is visible but $VENV has a CPU-only torch ${have% *}; replacing it"
            "${PIP[@]}" uninstall --quiet -y torch
        fi
        say "an NVIDIA GPU is visible; installing PyPI's torch (the CUDA build)"
        "${PIP[@]}" install --quiet torch || die "cannot install torch from PyPI"
    fi
else
    have="$(installed_torch || true)"
    if [ "${have#* }" = cpu ]; then
        say "keeping the CPU build torch ${have% *} in $VENV"
    else
        if [ -n "$have" ]; then
            say "no NVIDIA GPU, but $VENV has a CUDA build of torch ${have% *}; replacing it with a CPU build"
            "${PIP[@]}" uninstall --quiet -y torch
        fi
        try_cpu "PyTorch's CPU index ($CPU_INDEX)" torch --index-url "$CPU_INDEX" --timeout 15 --retries 1 \
        || try_cpu "torch==$TESTED_TORCH from pip's configured sources" "torch==$TESTED_TORCH" \
        || die "no CPU-only build of PyTorch could be found (and this machine has no NVIDIA GPU, so a multi-GB CUDA" \
               "build would be wasted). Install one into $VENV by hand, e.g. '$PY -m pip install torch" \
               "--index-url $CPU_INDEX', or name one: DAYBREAK_TORCH='torch==X.Y.Z' DAYBREAK_TORCH_INDEX=URL make run"
    fi
fi

# --- 3. daybreak, with torch held where it is ---------------------------------------------------------------------
TORCH_VERSION="$("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null)" \
    || die "torch is not installed in $VENV"
echo "torch==$TORCH_VERSION" >"$TMP/constraints.txt"
EXTRAS="test,loadgen,slurm"
[ "$GPU" = nvidia ] && EXTRAS="$EXTRAS,energy"  # NVML's energy counter (nvidia-ml-py) where there is a GPU to read
say "installing daybreak (editable) with its $EXTRAS extras"
# editable_mode=compat: a plain path in a .pth file, which type checkers follow (setuptools' default editable install
# is an import hook that mypy cannot see, so a user's script could not find the package's types)
if ! "${PIP[@]}" install --quiet -c "$TMP/constraints.txt" -e ".[$EXTRAS]" --config-settings editable_mode=compat \
        >"$TMP/pip.log" 2>&1; then
    cat "$TMP/pip.log" >&2
    die "installing daybreak failed (see pip's messages above); torch was held at $TORCH_VERSION"
fi

# --- 4. check -----------------------------------------------------------------------------------------------------
"$PY" - "$GPU" "${DAYBREAK_TORCH:-}${DAYBREAK_TORCH_INDEX:-}" <<'EOF' \
    || die "the environment in $VENV does not work (see above)"
import sys
import torch
import daybreak
gpu, override = sys.argv[1], sys.argv[2]
build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only"
if gpu == "none" and torch.version.cuda is not None and not override:
    sys.exit(f"bootstrap: error: torch {torch.__version__} is a CUDA build on a machine without an NVIDIA GPU")
print(f"bootstrap: ready: torch {torch.__version__} ({build}), daybreak {daybreak.__version__}", file=sys.stderr)
EOF
echo "$KEY" >"$STAMP"
