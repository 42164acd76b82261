"""The wheels daybreak needs on the lent GPU machine (no network there), from benchmarks/gpu_packages.toml.

Here, where the package registries answer (``bash benchmarks/gpu_suite.sh --prepare [--python 3.12]``)::

    python benchmarks/gpu_wheels.py prepare [--python-version 3.12] [--dest .gpu]

downloads the ``[bring]`` distributions as manylinux x86_64 / pure-Python wheels for that Python, pinned to the
versions installed in this environment (tested together here), into ``.gpu/`` (git-ignored) with a
``manifest.json`` (name, version, file, SHA-256, size, the target Python), at most 60 MiB, written atomically (a
new folder renamed over the old). On the GPU machine ``gpu_suite.py --offline`` calls :func:`install`: each wheel
whose distribution the machine lacks, or has in an older version, goes into a temporary folder with ``pip install
--no-index --no-deps --target`` (or, without pip, is unpacked there), and that folder is put on ``PYTHONPATH``.

Only the standard library at import time: the GPU side runs this before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DECLARATION = REPO / "benchmarks" / "gpu_packages.toml"
DEFAULT_DEST = REPO / ".gpu"
MANIFEST = "manifest.json"
MAX_BYTES = 60 * 2**20  # what may travel beside the working tree (the device's carry limit is 64 MiB in all)
PLATFORMS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64", "manylinux_2_34_x86_64",
             "manylinux_2_39_x86_64", "linux_x86_64")
INSTALL_TIMEOUT_S = 180


class WheelError(Exception):
    """One line for the user: what is wrong and what to do."""


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declaration(path: Path = DECLARATION) -> dict[str, Any]:
    with open(path, "rb") as f:
        return tomllib.load(f)


def to_bring(decl: dict[str, Any]) -> list[str]:
    """Every distribution ``prepare`` downloads, in the declaration's order."""
    b = decl["bring"]
    return [normalized(n) for n in [*b["distributions"], *b.get("newer_than_image", [])]]


# --- the derivation, checked by the tests ------------------------------------------------------------------------

def target_environment(python_version: str) -> dict[str, str]:
    """PEP 508 marker values of the GPU machine: CPython ``python_version`` on Linux x86_64."""
    return {"python_version": python_version, "python_full_version": f"{python_version}.0", "os_name": "posix",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def runtime_closure(requirements: list[str], python_version: str) -> dict[str, str]:
    """{distribution: the version installed here} for ``requirements`` and everything they require (extras
    followed) under the GPU machine's markers, read from this environment's installed metadata."""
    from importlib import metadata

    from packaging.requirements import Requirement

    env = target_environment(python_version)
    extras_of: dict[str, set[str]] = {}
    versions: dict[str, str] = {}
    stack = [Requirement(r) for r in requirements]
    while stack:
        req = stack.pop()
        name = normalized(req.name)
        new_extras = set(req.extras) - extras_of.get(name, set())
        if name in versions and not new_extras:
            continue
        extras_of.setdefault(name, set()).update(req.extras)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            raise WheelError(f"{req.name} is not installed here: run `make venv` first (prepare pins what "
                             "this environment holds)") from None
        versions[name] = dist.version.split("+")[0]
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is not None and not any(sub.marker.evaluate({**env, "extra": e})
                                                  for e in ({""} | extras_of[name])):
                continue
            stack.append(sub)
    return versions


def derived_bring(decl: dict[str, Any], python_version: str | None = None) -> set[str]:
    """[bring] as the declaration's comment defines it, computed from pyproject.toml and the installed metadata."""
    with open(REPO / "pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    from importlib import metadata

    version = python_version or decl["image"]["python"]
    closure = runtime_closure(deps, version)
    image = {normalized(n) for n in [*decl["image"]["distributions"], *decl["image"]["their_dependencies"]]}
    here = []  # the image's distributions installed here too: what they require is on the image as well
    for name in sorted(image):
        try:
            metadata.distribution(name)
            here.append(name)
        except metadata.PackageNotFoundError:
            pass
    image |= set(runtime_closure(here, version))
    return set(closure) - image - {normalized(n) for n in decl.get("not_needed", {})}


# --- here: download --------------------------------------------------------------------------------------------

def prepare(python_version: str, dest: Path = DEFAULT_DEST, decl_path: Path = DECLARATION) -> dict[str, Any]:
    """Download the [bring] wheels for ``python_version`` into ``dest`` (replaced atomically); the manifest."""
    from importlib import metadata

    if not re.fullmatch(r"3\.\d{1,2}", python_version):
        raise WheelError(f"--python {python_version}: give a CPython version such as 3.12")
    decl = declaration(decl_path)
    pins = []
    for name in to_bring(decl):
        try:
            pins.append(f"{name}=={metadata.version(name).split('+')[0]}")
        except metadata.PackageNotFoundError:
            raise WheelError(f"{name} is not installed here: run `make venv` first (prepare pins the versions "
                             "this environment holds)") from None
    abi = "cp" + python_version.replace(".", "")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--python-version", python_version, "--implementation", "cp", "--abi", abi, "--abi", "abi3",
               "--abi", "none", *[a for p in PLATFORMS for a in ("--platform", p)], "--dest", str(staging), *pins]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
            raise WheelError(f"pip download failed: {last[0]}")
        wheels = sorted(staging.glob("*.whl"))
        got = {normalized(w.name.split("-")[0]): w for w in wheels}
        missing = [p for p in pins if normalized(p.split("==")[0]) not in got]
        if missing:
            raise WheelError(f"no wheel for Python {python_version} / manylinux x86_64: {', '.join(missing)}")
        entries = [{"name": normalized(w.name.split("-")[0]), "version": w.name.split("-")[1], "file": w.name,
                    "sha256": hashlib.sha256(w.read_bytes()).hexdigest(), "bytes": w.stat().st_size}
                   for w in wheels]
        total = sum(e["bytes"] for e in entries)
        if total > MAX_BYTES:
            raise WheelError(f"the wheels take {total / 2**20:.1f} MiB, more than the {MAX_BYTES / 2**20:.0f} MiB "
                             "that may travel")
        manifest = {"python": python_version, "platforms": list(PLATFORMS), "wheels": entries, "bytes": total,
                    "declaration_sha256": hashlib.sha256(decl_path.read_bytes()).hexdigest()}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        os.chmod(staging, 0o755)
        old = None
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
            os.replace(dest, old / dest.name)
        os.replace(staging, dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return manifest
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# --- there: install ----------------------------------------------------------------------------------------------

@dataclass
class Installed:
    name: str
    version: str
    action: str  # "installed", "unpacked" or "image has X"


def _version_key(text: str) -> tuple:
    try:
        from packaging.version import Version

        return (0, Version(text))
    except Exception:  # noqa: BLE001 - no packaging on the machine, or an odd version: compare the numbers
        return (1, tuple(int(x) for x in re.findall(r"\d+", text)))


def _installed_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def install(wheels_dir: Path, target: Path) -> list[Installed]:
    """Install the manifest's wheels that this Python lacks (or has older) into ``target``; what was done."""
    wheels_dir = Path(wheels_dir)
    try:
        manifest = json.loads((wheels_dir / MANIFEST).read_text())
    except FileNotFoundError:
        raise WheelError(f"{wheels_dir}/{MANIFEST} not found: run `bash benchmarks/gpu_suite.sh --prepare` "
                         "where the registries answer, and let .gpu travel") from None
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    binary = [e["file"] for e in manifest["wheels"] if not e["file"].endswith("-none-any.whl")]
    if manifest["python"] != here and binary:
        raise WheelError(f"the wheels in {wheels_dir} are for Python {manifest['python']}, this is Python {here}: "
                         f"prepare them with `--prepare --python {here}`")
    done: list[Installed] = []
    todo: list[tuple[dict[str, Any], Path]] = []
    for entry in manifest["wheels"]:
        path = wheels_dir / entry["file"]
        if hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
            raise WheelError(f"{path}: its SHA-256 differs from the manifest's (a broken copy): prepare again")
        have = _installed_version(entry["name"])
        if have is not None and _version_key(have) >= _version_key(entry["version"]):
            done.append(Installed(entry["name"], entry["version"], f"image has {have}"))
        else:
            todo.append((entry, path))
    if not todo:
        return done
    target.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile",
           "--disable-pip-version-check", "--target", str(target), *[str(p) for _, p in todo]]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                              env={**os.environ, "PIP_NO_INDEX": "1"})
        via_pip = proc.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        via_pip = False
    for entry, path in todo:
        if not via_pip:  # no pip here (or it failed): a wheel is a zip of what goes into site-packages
            with zipfile.ZipFile(path) as z:
                z.extractall(target)
        done.append(Installed(entry["name"], entry["version"], "installed" if via_pip else "unpacked"))
    return done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/gpu_wheels.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    prep = sub.add_parser("prepare", help="download the wheels into .gpu/")
    prep.add_argument("--python-version", default=None, help="the GPU machine's Python (default: the "
                      "declaration's, 3.12)")
    prep.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    args = p.parse_args(argv)
    try:
        decl = declaration()
        version = args.python_version or decl["image"]["python"]
        manifest = prepare(version, args.dest)
    except WheelError as e:
        print(f"gpu_suite: error: {e}", file=sys.stderr)
        return 2
    inside = Path(args.dest).resolve().is_relative_to(REPO)
    rel = os.path.relpath(args.dest, REPO) if inside else str(args.dest)
    print(f"gpu_suite: {len(manifest['wheels'])} wheels for Python {version} in {rel}/ "
          f"({manifest['bytes'] / 2**20:.1f} MiB): " + ", ".join(f"{w['name']} {w['version']}"
                                                                 for w in manifest["wheels"]))
    offline = "bash benchmarks/gpu_suite.sh --offline --results $OUT"
    if inside:
        print(f"gpu_suite: what must travel: the working tree and `{rel}` (the device tool's carry=[\"{rel}\"]); "
              f"on the GPU machine run `{offline}`" + ("" if rel == ".gpu" else f" --wheels {rel}"))
    else:  # only paths inside the checkout travel
        print(f"gpu_suite: {rel} is outside the repository, and only the working tree travels: copy it into an "
              f"ignored folder of the repository (e.g. .gpu), carry that, and run `{offline} --wheels FOLDER`")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
