"""Fetching and verifying the official files of a dataset: streamed checksums, mirror downloads, atomic writes.

The readers (mnist.py, cifar10.py) describe each file they need as an :class:`OfficialFile` (name, published
checksum, mirrors) and call :func:`ensure_files`, which finds the files in the task folder, downloads the missing
ones and checks every checksum. A file that does not match is refused with a :class:`ChecksumError` unless the
user passed ``--allow-custom-data``, in which case the data is recorded ``official: false`` with a note.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.request import Request, urlopen

from tqdm import tqdm

from daybreak.errors import ChecksumError, DataError, OfflineError
from daybreak.fileio import atomic_write
from daybreak.text import one_line

READ_TIMEOUT_S = 60  # per socket operation (connect, each read), not for the whole file
CHUNK_BYTES = 1 << 20
USER_AGENT = "daybreak-benchmark (dataset download)"

# Everything urlopen() or a socket read raises when the network fails: URLError and HTTPError (OSError
# subclasses), timeouts, resets, SSL errors (all OSError) and http.client's protocol errors such as IncompleteRead.
_NETWORK_ERRORS = (OSError, http.client.HTTPException)


@dataclass(frozen=True)
class OfficialFile:
    """One file of a dataset's official distribution, as it lies in the task folder."""

    name: str  # file name inside the task folder, e.g. "train-images-idx3-ubyte.gz"
    digest: str  # hex digest of the official file
    algorithm: str = "sha256"  # "sha256", or "md5" where that is the only published checksum
    urls: tuple[str, ...] = ()  # mirrors to fetch it from, tried in order; empty: never downloaded


@dataclass
class FoundFiles:
    """What :func:`ensure_files` found: one path per requested file, and whether all were official."""

    paths: list[Path]
    official: bool
    notes: list[str]


def file_digest(path: str | os.PathLike[str], algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in chunks so that large files never sit in memory."""
    h = hashlib.new(algorithm, usedforsecurity=False) if algorithm == "md5" else hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            h.update(chunk)
    return h.hexdigest()


def _algorithm_label(algorithm: str) -> str:
    return {"sha256": "SHA-256", "md5": "MD5"}.get(algorithm, algorithm.upper())


# ---------------------------------------------------------------------------------------------- downloading


def _show_progress(progress: bool) -> bool:
    return progress and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


def _offline(url: str, err: BaseException) -> OfflineError:
    return OfflineError(f"cannot download {url}: {one_line(err)}")


def _stream_to(url: str, out: IO[bytes], *, progress: bool, label: str) -> str:
    """Copy ``url`` into ``out``; return the SHA-256 of the bytes.

    Only the network calls are wrapped (-> OfflineError); an OSError from ``out.write`` is a disk problem and
    propagates as is.
    """
    h = hashlib.sha256()
    try:
        response = urlopen(Request(url, headers={"User-Agent": USER_AGENT}), timeout=READ_TIMEOUT_S)
    except _NETWORK_ERRORS as err:
        raise _offline(url, err) from err
    with response:
        length = response.headers.get("Content-Length") if getattr(response, "headers", None) else None
        total = int(length) if length and str(length).isdigit() else None
        with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=label, file=sys.stderr,
                  disable=not _show_progress(progress), leave=False) as bar:
            while True:
                try:
                    chunk = response.read(CHUNK_BYTES)
                except _NETWORK_ERRORS as err:
                    raise _offline(url, err) from err
                if not chunk:
                    break
                h.update(chunk)
                out.write(chunk)
                bar.update(len(chunk))
    return h.hexdigest()


def download_file(url: str, dest: Path, sha256: str | None, *, progress: bool = True) -> Path:
    """Download ``url`` to ``dest`` via a temp file beside it; verify ``sha256`` (if given) before the rename.

    A failed or mismatching download leaves neither ``dest`` nor a temp file behind.
    Raises OfflineError (network), ChecksumError (wrong bytes) or DataError (cannot write the folder).
    """
    dest = Path(dest)

    def write(out: IO[bytes]) -> None:
        got = _stream_to(url, out, progress=progress, label=dest.name)
        if sha256 is not None and got != sha256.lower():
            raise ChecksumError(
                f"{dest.name} downloaded from {url} does not match the official SHA-256 (got {got}); "
                f"try again later, or put the official file into {dest.parent}"
            )

    try:
        return atomic_write(dest, write)
    except OSError as err:  # the network errors were already turned into OfflineError: this is the disk
        raise DataError(f"cannot write {dest}: {one_line(err)}; make the folder writable or pass --data-dir") from err


def fetch(file: OfficialFile, folder: Path, *, progress: bool = True) -> Path:
    """Download ``file`` into ``folder``, trying its mirrors in order; the first verified copy wins."""
    if not file.urls:
        raise OfflineError(f"{file.name} has no download address")
    if file.algorithm != "sha256":
        raise ValueError(f"downloads are verified by SHA-256, {file.name} only has {file.algorithm}")
    failures: list[DataError] = []
    for url in file.urls:
        try:
            return download_file(url, folder / file.name, file.digest, progress=progress)
        except (OfflineError, ChecksumError) as err:  # this mirror is down or serves other bytes: try the next
            failures.append(err)
    # Report a wrong download over a dead mirror: it says more about what went wrong.
    checksum = [e for e in failures if isinstance(e, ChecksumError)]
    raise checksum[-1] if checksum else failures[-1]


# ------------------------------------------------------------------------------------------- verification


def verify_files(
    task: str, found: Sequence[tuple[Path, OfficialFile]], *, allow_custom_data: bool
) -> tuple[bool, list[str]]:
    """Check each file against its official checksum. Returns ``(official, notes)``.

    A mismatch raises ChecksumError naming the files, unless ``allow_custom_data``: then it returns
    ``official=False`` and a note that names them.
    """
    bad = [(path, spec) for path, spec in found if file_digest(path, spec.algorithm) != spec.digest.lower()]
    if not bad:
        return True, []
    algorithms = " / ".join(sorted({_algorithm_label(spec.algorithm) for _, spec in bad}))
    if not allow_custom_data:
        paths = ", ".join(str(path) for path, _ in bad)
        verb = "does" if len(bad) == 1 else "do"
        raise ChecksumError(
            f"{task}: {paths} {verb} not match the official {algorithms} (custom or corrupt data); "
            "pass --allow-custom-data to use it anyway (the run is recorded official: false)"
        )
    names = ", ".join(path.name for path, _ in bad)
    return False, [f"custom data: {names} not matching the official {algorithms} (--allow-custom-data)"]


def _find(folder: Path, alternatives: Sequence[OfficialFile]) -> tuple[Path, OfficialFile] | None:
    for spec in alternatives:
        path = folder / spec.name
        if path.is_file():
            return path, spec
    return None


def _downloadable(alternatives: Sequence[OfficialFile]) -> OfficialFile | None:
    return next((spec for spec in alternatives if spec.urls), None)


def ensure_files(
    task: str,
    folder: Path,
    required: Sequence[Sequence[OfficialFile]],
    *,
    allow_custom_data: bool,
    download: bool,
    progress: bool = True,
    wanted: str | None = None,
) -> FoundFiles:
    """Find, download if missing, and verify the files a task needs.

    ``required`` holds one entry per needed file: the forms it may take, in order of preference (e.g. the
    ``.gz`` then the uncompressed file). The first form present in ``folder`` is used; when none is, the first
    form that has URLs is downloaded. ``wanted`` overrides the file list that error messages tell the user to
    provide. Returns one path per entry of ``required``.
    """
    folder = Path(folder)
    found: list[tuple[Path, OfficialFile] | None] = [_find(folder, alts) for alts in required]
    missing = [i for i, hit in enumerate(found) if hit is None]
    if missing:
        names = wanted or ", ".join(_missing_name(required[i]) for i in missing)
        if not download:
            raise DataError(
                f"{task}: {names} not found in {folder} and downloading is disabled; "
                "put the files there (or pass --data-dir)"
            )
        _download_missing(task, folder, required, found, names, progress=progress)
    hits = [hit for hit in found if hit is not None]
    official, notes = verify_files(task, hits, allow_custom_data=allow_custom_data)
    return FoundFiles(paths=[path for path, _ in hits], official=official, notes=notes)


def _download_missing(
    task: str,
    folder: Path,
    required: Sequence[Sequence[OfficialFile]],
    found: list[tuple[Path, OfficialFile] | None],
    names: str,
    *,
    progress: bool,
) -> None:
    """Download each missing entry of ``found`` in place; stop at the first one no mirror could serve."""
    for i, hit in enumerate(found):
        spec = _downloadable(required[i]) if hit is None else None
        if spec is None:
            continue
        try:
            found[i] = (fetch(spec, folder, progress=progress), spec)
        except OfflineError as err:  # the next files would fail (or time out) the same way: stop here
            raise OfflineError(
                f"{task}: cannot download (offline? {one_line(err)}); put {names} into {folder} (or pass --data-dir)"
            ) from err
        except ChecksumError as err:
            raise ChecksumError(f"{task}: {err}") from err
    if any(hit is None for hit in found):
        raise OfflineError(f"{task}: {names} cannot be downloaded; put them into {folder} (or pass --data-dir)")


def _missing_name(alternatives: Sequence[OfficialFile]) -> str:
    spec = _downloadable(alternatives) or alternatives[0]
    return spec.name
