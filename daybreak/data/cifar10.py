"""CIFAR-10 from its python distribution: the tarball, read in place, or the extracted cifar-10-batches-py/.

SECURITY: the batches are Python pickles, and unpickling can run arbitrary code. We only read files the user
pointed at (their --data-dir or the cache folder we downloaded into), and we unpickle them with
:class:`RestrictedUnpickler`, which resolves only the few numpy globals an array needs and refuses any other
(os.system, builtins.eval, ...) with a DataError, so even a hostile file cannot execute code here.
"""

from __future__ import annotations

import codecs
import io
import os
import pickle
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from daybreak.data.base import TaskData, task_data_dir
from daybreak.data.download import OfficialFile, ensure_files, verify_files
from daybreak.errors import DataError
from daybreak.text import one_line

TASK = "cifar10"
NUM_CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)
ROW_BYTES = 3 * 32 * 32  # one image: 1024 red, then 1024 green, then 1024 blue bytes, row-major

TARBALL_NAME = "cifar-10-python.tar.gz"
TARBALL_URLS: tuple[str, ...] = ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",)
# The published checksum of the tarball (its MD5, as published, is c58f30108f718f92721af3b95e74349a).
TARBALL_SHA256 = "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"
BATCHES_DIR = "cifar-10-batches-py"
TRAIN_BATCHES: tuple[str, ...] = tuple(f"data_batch_{i}" for i in range(1, 6))
EVAL_BATCH = "test_batch"
ALL_BATCHES: tuple[str, ...] = (*TRAIN_BATCHES, EVAL_BATCH)

# Checksum rule for an extracted folder. The dataset's authors publish a checksum of the tarball only. The MD5
# of each extracted batch below is the table torchvision ships (and checks) for this distribution, copied
# unchanged into many projects; no SHA-256 of the extracted files is published. So: a tarball is checked
# against its published SHA-256; an extracted folder is official when all six batches match these MD5 values.
# MD5 is not collision-resistant, but it is checked to tell the official files from corrupt or custom ones,
# not to resist a forger. batches.meta (class names only) is not read, so it is not checked.
BATCH_MD5: dict[str, str] = {
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
}

WANTED = f"{TARBALL_NAME} (or the extracted {BATCHES_DIR}/)"


# -------------------------------------------------------------------------------------------- safe unpickling


class ForbiddenGlobal(pickle.UnpicklingError):
    def __init__(self, qualified_name: str):
        super().__init__(f"forbidden global {qualified_name}")
        self.qualified_name = qualified_name


def _allowed_globals() -> dict[tuple[str, str], Callable[..., Any] | type]:
    """The only callables a batch may name: what numpy itself uses to pickle arrays, dtypes and scalars.

    The functions are taken from how this numpy pickles (so they exist whatever its version); both module
    spellings are accepted, since files pickled under numpy 1.x say numpy.core and under 2.x numpy._core.
    ``_codecs.encode`` is how Python 3 writes bytes at pickle protocol 2 (it only encodes a string).
    """
    sample = np.zeros(1, dtype=np.uint8)
    reconstruct: Callable[..., Any] = sample.__reduce__()[0]  # type: ignore[assignment]
    frombuffer: Callable[..., Any] = sample.__reduce_ex__(5)[0]  # type: ignore[assignment]
    scalar: Callable[..., Any] = np.int64(0).__reduce__()[0]  # type: ignore[assignment]
    allowed: dict[tuple[str, str], Callable[..., Any] | type] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): codecs.encode,
    }
    for core in ("numpy.core", "numpy._core"):
        allowed[(f"{core}.multiarray", "_reconstruct")] = reconstruct
        allowed[(f"{core}.multiarray", "scalar")] = scalar
        allowed[(f"{core}.numeric", "_frombuffer")] = frombuffer
    return allowed


_ALLOWED = _allowed_globals()


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler that resolves only numpy's array/dtype/scalar reconstruction globals."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise ForbiddenGlobal(f"{module}.{name}") from None


def unpickle_batch(data: bytes, where: str) -> Any:
    """Unpickle one batch (Python 2 strings come back as bytes, as in the original files)."""
    try:
        return RestrictedUnpickler(io.BytesIO(data), encoding="bytes").load()
    except ForbiddenGlobal as err:
        raise DataError(
            f"{TASK}: {where} asks to run {err.qualified_name} when unpickled, which a CIFAR-10 batch never does; "
            "refused (delete that file and use the official data)"
        ) from None
    except Exception as err:  # any failure of a corrupt pickle: EOFError, UnpicklingError, ValueError, ...
        raise DataError(
            f"{TASK}: cannot unpickle {where} ({one_line(err)}); it is corrupt or not a CIFAR-10 python batch"
        ) from err


# --------------------------------------------------------------------------------------------------- batches


def _field(batch: dict[Any, Any], key: str, where: str) -> Any:
    for candidate in (key.encode(), key):  # original files have bytes keys; accept str keys of re-made files
        if candidate in batch:
            return batch[candidate]
    raise DataError(f"{TASK}: {where} has no '{key}' entry; it is not a CIFAR-10 python batch")


def decode_batch(batch: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate an unpickled batch; return its images as uint8 (N, 3, 32, 32) and labels as int64 (N,)."""
    if not isinstance(batch, dict):
        raise DataError(f"{TASK}: {where} holds a {type(batch).__name__}, not a CIFAR-10 batch dict")
    data = _field(batch, "data", where)
    labels = _field(batch, "labels", where)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != ROW_BYTES:
        what = f"{data.dtype} array of shape {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
        raise DataError(f"{TASK}: {where} 'data' is a {what}, expected uint8 of shape (N, {ROW_BYTES})")
    y = _labels_array(labels, where)
    if len(y) != len(data):
        raise DataError(f"{TASK}: {where} has {len(data)} images but {len(y)} labels")
    if len(y) and (int(y.min()) < 0 or int(y.max()) >= NUM_CLASSES):
        bad = int(y.min()) if int(y.min()) < 0 else int(y.max())
        raise DataError(f"{TASK}: {where} has label {bad}, outside 0..{NUM_CLASSES - 1}")
    return data.reshape(-1, *IMAGE_SHAPE), y


def _labels_array(labels: Any, where: str) -> np.ndarray:
    try:
        y = np.asarray(labels)
    except Exception as err:
        raise DataError(f"{TASK}: {where} 'labels' cannot be read as integers ({one_line(err)})") from err
    if y.ndim != 1 or (y.size and y.dtype.kind not in "iu"):
        raise DataError(f"{TASK}: {where} 'labels' is {y.ndim}-D {y.dtype}, expected a flat list of integers")
    return y.astype(np.int64)


# ------------------------------------------------------------------------------------------------ the layouts


def read_tarball_members(tarball: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    """Bytes of the members whose base name is in ``names``, read in one pass (no extraction to disk)."""
    wanted = set(names)
    blobs: dict[str, bytes] = {}
    try:
        with tarfile.open(tarball, mode="r|*") as archive:  # stream mode: one sequential pass over the gzip
            for member in archive:
                base = member.name.rstrip("/").rsplit("/", 1)[-1]
                if member.isfile() and base in wanted and base not in blobs:
                    extracted = archive.extractfile(member)
                    assert extracted is not None  # a regular file always has content
                    blobs[base] = extracted.read()
                    if len(blobs) == len(wanted):
                        break
    except (tarfile.TarError, EOFError, OSError, zlib.error) as err:
        raise DataError(
            f"{TASK}: {tarball} is corrupt or truncated ({one_line(err)}); delete it to download it again, "
            "or replace it"
        ) from err
    missing = [name for name in names if name not in blobs]
    if missing:
        raise DataError(f"{TASK}: {tarball} lacks {', '.join(missing)}; it is not the CIFAR-10 python tarball")
    return blobs


def _read_folder(batches_dir: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    blobs: dict[str, bytes] = {}
    for name in names:
        try:
            blobs[name] = (batches_dir / name).read_bytes()
        except OSError as err:
            raise DataError(f"{TASK}: cannot read {batches_dir / name}: {one_line(err)}") from err
    return blobs


def _extracted_dir(folder: Path) -> Path | None:
    """The extracted batches folder: ``folder/cifar-10-batches-py/`` or ``folder`` itself, if it has batches."""
    for candidate in (folder / BATCHES_DIR, folder):
        if any((candidate / name).is_file() for name in ALL_BATCHES):
            return candidate
    return None


def _from_extracted(batches_dir: Path, allow_custom_data: bool) -> tuple[dict[str, bytes], bool, list[str]]:
    missing = [name for name in ALL_BATCHES if not (batches_dir / name).is_file()]
    if missing:
        raise DataError(
            f"{TASK}: {batches_dir} lacks {', '.join(missing)}; put the complete {BATCHES_DIR}/ "
            f"or {TARBALL_NAME} there"
        )
    specs = [(batches_dir / name, OfficialFile(name, BATCH_MD5[name], algorithm="md5")) for name in ALL_BATCHES]
    official, notes = verify_files(TASK, specs, allow_custom_data=allow_custom_data)
    return _read_folder(batches_dir, ALL_BATCHES), official, notes


def folder_of_source(source: str) -> Path | None:
    """The folder to read again for a run whose ``data_source`` is ``source``: the tarball's or the extracted
    batches folder's parent (the folder given as --data-dir), else the folder itself."""
    if not source:
        return None
    path = Path(source)
    return path.parent if path.name in (TARBALL_NAME, BATCHES_DIR) else path


def load_cifar10(
    data_dir: str | os.PathLike[str] | None, *, allow_custom_data: bool = False, download: bool = True
) -> TaskData:
    """Load CIFAR-10 from ``data_dir`` (or the cache folder), downloading the tarball if nothing is there.

    The tarball is preferred when both it and an extracted folder are present (its checksum is the published
    one). Images come back as uint8 (N, 3, 32, 32), labels as int64; train is data_batch_1..5, eval test_batch.
    """
    folder = task_data_dir(TASK, data_dir)
    batches_dir = None if (folder / TARBALL_NAME).is_file() else _extracted_dir(folder)
    if batches_dir is None:
        tarball = OfficialFile(TARBALL_NAME, TARBALL_SHA256, urls=TARBALL_URLS)
        found = ensure_files(TASK, folder, [(tarball,)], allow_custom_data=allow_custom_data, download=download,
                             wanted=WANTED)
        source = found.paths[0]
        blobs, official, notes = read_tarball_members(source, ALL_BATCHES), found.official, found.notes
    else:
        source = batches_dir
        blobs, official, notes = _from_extracted(batches_dir, allow_custom_data)

    decoded = {name: decode_batch(unpickle_batch(blobs[name], f"{source}: {name}"), f"{source}: {name}")
               for name in ALL_BATCHES}
    train_x = np.concatenate([decoded[name][0] for name in TRAIN_BATCHES])
    train_y = np.concatenate([decoded[name][1] for name in TRAIN_BATCHES])
    eval_x, eval_y = decoded[EVAL_BATCH]
    return TaskData(
        train_x=torch.from_numpy(train_x),
        train_y=torch.from_numpy(train_y),
        eval_x=torch.from_numpy(np.require(eval_x, requirements=["C", "W"])),
        eval_y=torch.from_numpy(np.require(eval_y, requirements=["C", "W"])),
        num_classes=NUM_CLASSES,
        official=official,
        source=os.path.abspath(source),  # absolute: `daybreak infer`/`evaluate` find it again from anywhere
        notes=list(notes),
    )
