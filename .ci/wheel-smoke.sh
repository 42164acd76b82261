#!/usr/bin/env bash
# The wheel on its own, as a user installs it (CI runs this after the test suite; it takes a few minutes):
#
#   1. build the sdist and the wheel (`python -m build`: the wheel is built from the sdist) and `twine check` them;
#   2. a fresh virtual environment with a CPU torch installed first (the version .venv has), then the wheel alone:
#      no checkout on the path (it runs in an empty folder); `daybreak --version`, every module but the leaderboard's
#      imports, `daybreak run` reaches the target, and `daybreak leaderboard serve` says in one line which extra to
#      install (exit 2), with none of the leaderboard's packages installed;
#   3. the wheel with the [leaderboard] extra: every file of the checkout's package is installed (templates, catalog
#      JSON, py.typed, every module), every module imports, and `daybreak leaderboard serve` on a loopback port
#      answers /, /openapi.json and /docs.
#
# Usage: bash .ci/wheel-smoke.sh   (needs .venv with the release extra: `make venv`; PYTHON=... for another one)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 NO_MKDOCS_2_WARNING=1
PY="${PYTHON:-$ROOT/.venv/bin/python}"
CPU_INDEX=https://download.pytorch.org/whl/cpu
WORK="$(mktemp -d)"
SERVER=""
cleanup() {
    if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
say() { echo "wheel-smoke: $*" >&2; }
quiet() { grep -v "^WARNING: Location .* is ignored" >&2 || true; }  # pip's note on each unused local index entry
fail() { echo "wheel-smoke: FAILED: $*" >&2; exit 1; }

# --- 1. build and check -----------------------------------------------------------------------------------------
say "building the sdist and the wheel"
"$PY" -m build --outdir "$WORK/dist" . >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; fail "python -m build"; }
"$PY" -m twine check --strict "$WORK"/dist/* || fail "twine check"
WHEEL="$(ls "$WORK"/dist/daybreak-*-py3-none-any.whl)"
VERSION="$("$PY" -c 'import sys; print(sys.argv[1].split("/")[-1].split("-")[1])' "$WHEEL")"
[ "$VERSION" = "$("$PY" -c 'from daybreak.version import __version__; print(__version__)')" ] \
    || fail "the wheel's version $VERSION is not daybreak/version.py's"
say "built $(basename "$WHEEL") and $(basename "$(ls "$WORK"/dist/daybreak-*.tar.gz)")"

# --- 2. the core install ----------------------------------------------------------------------------------------
"$PY" -m venv "$WORK/venv" 2>/dev/null || python3 -m venv "$WORK/venv"
V="$WORK/venv/bin"
TORCH="$("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))')"
say "installing torch ${TORCH%%+*} (the version .venv has) into a fresh environment"
if nvidia-smi -L >/dev/null 2>&1; then
    "$V/pip" install -q "torch==${TORCH%%+*}" 2> >(quiet)
else  # a CPU build: PyTorch's CPU index, else pip's configured sources (a local CPU wheel)
    "$V/pip" install -q "torch==${TORCH%%+*}" --index-url "$CPU_INDEX" --timeout 15 --retries 1 2>/dev/null \
        || "$V/pip" install -q "torch==${TORCH%%+*}" 2> >(quiet)
    "$V/python" -W ignore -c 'import torch, sys; sys.exit(torch.version.cuda is not None)' \
        || fail "a CUDA build of torch was installed on a machine without an NVIDIA GPU"
fi
echo "torch==$("$V/python" -c 'import importlib.metadata as m; print(m.version("torch"))')" >"$WORK/constraints.txt"
say "installing the wheel alone (the core install)"
"$V/pip" install -q -c "$WORK/constraints.txt" "$WHEEL" 2> >(quiet)

mkdir "$WORK/empty" && cd "$WORK/empty"  # no checkout on the path from here on
unset PYTHONPATH
"$V/python" - "$ROOT" <<'EOF' || fail "the core install"
import importlib, importlib.util, pkgutil, sys
from pathlib import Path
import daybreak
root = Path(sys.argv[1]).resolve()
assert root not in Path(daybreak.__file__).resolve().parents, f"daybreak imported from the checkout: {daybreak.__file__}"
server = ["fastapi", "starlette", "uvicorn", "sqlalchemy", "psycopg", "multipart", "python_multipart"]
present = [m for m in server if importlib.util.find_spec(m) is not None]
assert not present, f"the core install holds the leaderboard's packages: {present}"
skipped = ("daybreak.leaderboard", "daybreak.sweep.frameworks", "daybreak.__main__")
names = [m.name for m in pkgutil.walk_packages(daybreak.__path__, "daybreak.") if not m.name.startswith(skipped)]
for name in names:
    importlib.import_module(name)
print(f"wheel-smoke: the core install imports {len(names)} modules without the leaderboard's packages", file=sys.stderr)
EOF
[ "$("$V/daybreak" --version)" = "daybreak $VERSION" ] || fail "daybreak --version says $("$V/daybreak" --version)"

say "daybreak run (digits to its target), from the wheel"
"$V/daybreak" run --out "$WORK/run" >"$WORK/run.txt" 2>&1 || { cat "$WORK/run.txt" >&2; fail "daybreak run"; }
grep -q "REACHED the target" "$WORK/run.txt" || { cat "$WORK/run.txt" >&2; fail "daybreak run did not reach"; }
"$V/python" - "$WORK/run/result.json" "$VERSION" <<'EOF' || fail "the run's record"
import json, sys
record = json.load(open(sys.argv[1]))
assert record["daybreak_version"] == sys.argv[2] and record["system"]["daybreak"] == sys.argv[2], record["daybreak_version"]
assert record["status"] == "reached"
EOF

say "daybreak leaderboard serve without the leaderboard extra"
set +e
"$V/daybreak" leaderboard serve --db "sqlite:///$WORK/none.sqlite" --port 0 >"$WORK/serve.out" 2>"$WORK/serve.err"
rc=$?
set -e
[ "$rc" -eq 2 ] || { cat "$WORK/serve.err" >&2; fail "serve without the extra exited $rc, not 2"; }
[ "$(wc -l <"$WORK/serve.err")" -eq 1 ] && ! grep -q Traceback "$WORK/serve.err" \
    && grep -qF "pip install 'daybreak[leaderboard]'" "$WORK/serve.err" \
    || { cat "$WORK/serve.err" >&2; fail "serve without the extra did not say in one line which extra to install"; }
[ ! -e "$WORK/none.sqlite" ] || fail "serve without the extra made a database"
say "  $(cat "$WORK/serve.err")"

# --- 3. with the leaderboard extra ------------------------------------------------------------------------------
say "installing the wheel with the [leaderboard] extra"
"$V/pip" install -q -c "$WORK/constraints.txt" "daybreak[leaderboard] @ file://$WHEEL" 2> >(quiet)
(cd "$ROOT" && git ls-files daybreak) >"$WORK/files.txt"
"$V/python" - "$WORK/files.txt" <<'EOF' || fail "the installed package's files"
import importlib, pkgutil, sys
from pathlib import Path
import daybreak
installed = Path(daybreak.__file__).parent
wanted = [line.strip().split("/", 1)[1] for line in open(sys.argv[1]) if line.strip()]
missing = [f for f in wanted if not (installed / f).is_file()]
assert not missing, f"not in the wheel: {missing}"
data = [f for f in wanted if not f.endswith(".py")]
names = [m.name for m in pkgutil.walk_packages(daybreak.__path__, "daybreak.")
         if not m.name.startswith(("daybreak.sweep.frameworks", "daybreak.__main__"))]
for name in names:
    importlib.import_module(name)
print(f"wheel-smoke: all {len(wanted)} files of the package installed ({len(data)} not Python: "
      f"{', '.join(sorted(data))}); {len(names)} modules import", file=sys.stderr)
EOF

PORT="$("$V/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
say "daybreak leaderboard serve on 127.0.0.1:$PORT"
"$V/daybreak" leaderboard serve --db "sqlite:///$WORK/board.sqlite" --host 127.0.0.1 --port "$PORT" \
    >"$WORK/server.log" 2>&1 &
SERVER=$!
"$V/python" - "$PORT" "$SERVER" <<'EOF' || { cat "$WORK/server.log" >&2; fail "the served board"; }
import json, os, sys, time, urllib.request
port, pid = sys.argv[1], int(sys.argv[2])
base = f"http://127.0.0.1:{port}"
deadline = time.monotonic() + 120
while True:  # bounded: the server starts, or the check fails after 2 minutes
    try:
        with urllib.request.urlopen(base + "/", timeout=5) as r:
            page = r.read().decode()
        break
    except OSError:
        os.kill(pid, 0)  # still running (else: it exited, and this raises)
        if time.monotonic() > deadline:
            raise SystemExit("the server did not answer within 120 s")
        time.sleep(0.5)
assert "<html" in page.lower() and "daybreak" in page.lower(), page[:300]  # the templates rendered
with urllib.request.urlopen(base + "/openapi.json", timeout=10) as r:
    document = json.load(r)
assert document["info"]["version"] and "/api/submissions" in document["paths"]
with urllib.request.urlopen(base + "/docs", timeout=10) as r:
    assert r.status == 200
print(f"wheel-smoke: the served board answers / ({len(page)} bytes), /openapi.json and /docs", file=sys.stderr)
EOF
kill -TERM "$SERVER"
wait "$SERVER" || true
SERVER=""
say "ok: daybreak $VERSION from its wheel"
