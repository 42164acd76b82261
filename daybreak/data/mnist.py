"""MNIST from its four IDX files (gzipped or not), checked against the official checksums."""

from __future__ import annotations

import gzip
import math
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import torch

from daybreak.data.base import TaskData, task_data_dir
from daybreak.data.download import OfficialFile, ensure_files
from daybreak.errors import DataError
from daybreak.text import one_line

TASK = "mnist"
NUM_CLASSES = 10

# Tried in order; each serves the four .gz files under the same names.
MIRRORS: tuple[str, ...] = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)

# Base names in the order train images, train labels, eval images, eval labels.
TRAIN_IMAGES, TRAIN_LABELS = "train-images-idx3-ubyte", "train-labels-idx1-ubyte"
EVAL_IMAGES, EVAL_LABELS = "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"
FILE_NAMES: tuple[str, ...] = (TRAIN_IMAGES, TRAIN_LABELS, EVAL_IMAGES, EVAL_LABELS)

# Checksum rule: when "<name>.gz" is present it is used and checked against the published SHA-256 of the
# official .gz; only when it is absent is the uncompressed "<name>" used, checked against the SHA-256 of the
# official file's uncompressed bytes. Either way a mismatch means custom/corrupt data (--allow-custom-data).
GZ_SHA256: dict[str, str] = {
    TRAIN_IMAGES: "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    TRAIN_LABELS: "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    EVAL_IMAGES: "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    EVAL_LABELS: "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}
RAW_SHA256: dict[str, str] = {  # official sizes: 47,040,016 / 60,008 / 7,840,016 / 10,008 bytes
    TRAIN_IMAGES: "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    TRAIN_LABELS: "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    EVAL_IMAGES: "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    EVAL_LABELS: "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}

# IDX type codes -> big-endian numpy dtypes.
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
GZIP_MAGIC = b"\x1f\x8b"


# ------------------------------------------------------------------------------------------------ IDX files


# A gzipped IDX file is decompressed only as far as its own header says it goes (header + shape x item size),
# and never past MAX_IDX_BYTES: a small .gz that would expand to gigabytes (a "zip bomb") is refused after
# reading what its header declares, not after filling memory. The official files are far below the cap
# (train images: 47,040,016 bytes).
MAX_IDX_BYTES = 2 * 1024**3
_GUNZIP_CHUNK = 1 << 20


def _read_bytes(path: Path) -> bytes:
    """The file's content, gunzipped when it starts with the gzip magic (whatever its name)."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DataError(f"cannot read {path}: {one_line(err)}") from err
    if raw[:2] != GZIP_MAGIC:
        return raw
    try:
        return _gunzip_idx(raw, path)
    except (gzip.BadGzipFile, EOFError, zlib.error, OSError) as err:
        raise DataError(f"{path} is a corrupt or truncated gzip file ({one_line(err)}); replace it") from err


def _idx_size(head: bytes) -> int | None:
    """The total size an IDX header declares (None until enough of it is there, -1 if it is not IDX)."""
    if len(head) < 4:
        return None
    if head[0] != 0 or head[1] != 0 or head[2] not in IDX_DTYPES:
        return -1
    ndim = head[3]
    if len(head) < 4 + 4 * ndim:
        return None
    shape: tuple[int, ...] = struct.unpack(f">{ndim}I", head[4 : 4 + 4 * ndim])
    return 4 + 4 * ndim + math.prod(shape) * IDX_DTYPES[head[2]].itemsize


def _gunzip_idx(raw: bytes, path: Path) -> bytes:
    """Gunzip (every gzip member) in bounded steps, stopping one byte past the size the IDX header declares."""
    out = bytearray()
    limit: int | None = None
    data = raw
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # one gzip member
        while True:
            want = _GUNZIP_CHUNK if limit is None else max(1, min(_GUNZIP_CHUNK, limit + 1 - len(out)))
            out += d.decompress(data, want)
            data = d.unconsumed_tail
            if limit is None:
                size = _idx_size(bytes(out[:1024]))
                if size == -1:
                    return bytes(out)  # not IDX: parse_idx says so
                if size is not None:
                    if size > MAX_IDX_BYTES:
                        raise DataError(f"{path}: its IDX header declares {size:,} bytes, more than the "
                                        f"{MAX_IDX_BYTES:,} allowed; replace it")
                    limit = size
            if limit is not None and len(out) > limit:
                raise DataError(f"{path} decompresses to more than the {limit:,} bytes its IDX header declares; "
                                "replace it")
            if d.eof:
                data = d.unused_data
                break
            if not data and not d.unconsumed_tail:
                out += d.flush()
                if not d.eof:
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
                data = d.unused_data
                break
        if data and not data.startswith(GZIP_MAGIC):
            data = b""  # trailing bytes after the last member (gzip.decompress ignores zero padding likewise)
    return bytes(out)


def parse_idx(data: bytes, name: str = "IDX data") -> np.ndarray:
    """Decode IDX bytes into a native-endian array of the shape the header gives. ``name`` labels errors."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise DataError(f"{name} is not an IDX file (bad magic number {data[:4].hex() or 'empty'}); replace it")
    code, ndim = data[2], data[3]
    if code not in IDX_DTYPES:
        raise DataError(f"{name} has unknown IDX type code 0x{code:02x}; replace it")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataError(f"{name} is truncated: {len(data)} bytes, shorter than its {header}-byte IDX header")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    dtype = IDX_DTYPES[code]
    expected = math.prod(shape) * dtype.itemsize
    actual = len(data) - header
    if actual != expected:
        problem = "truncated" if actual < expected else "has trailing bytes"
        raise DataError(
            f"{name} {problem}: shape {shape} of {dtype.name} needs {expected} data bytes, found {actual}; replace it"
        )
    array = np.frombuffer(data, dtype=dtype, count=math.prod(shape), offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))  # a native-endian, writable copy


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an IDX file (gzipped or not, told apart by content). Raises DataError naming the file."""
    path = Path(path)
    return parse_idx(_read_bytes(path), str(path))


# ---------------------------------------------------------------------------------------------------- MNIST


def official_files() -> list[tuple[OfficialFile, OfficialFile]]:
    """For each needed file: the .gz (preferred, downloadable), then the uncompressed file."""
    return [
        (
            OfficialFile(f"{name}.gz", GZ_SHA256[name], urls=tuple(mirror + f"{name}.gz" for mirror in MIRRORS)),
            OfficialFile(name, RAW_SHA256[name]),
        )
        for name in FILE_NAMES
    ]


def _images(path: Path) -> np.ndarray:
    array = read_idx(path)
    if array.ndim != 3 or array.dtype != np.uint8:
        raise DataError(
            f"{TASK}: {path} holds {array.ndim}-D {array.dtype} data, expected 3-D unsigned bytes (images); replace it"
        )
    return array


def _labels(path: Path, count: int, images_path: Path) -> np.ndarray:
    array = read_idx(path)
    if array.ndim != 1 or array.dtype != np.uint8:
        raise DataError(
            f"{TASK}: {path} holds {array.ndim}-D {array.dtype} data, expected 1-D unsigned bytes (labels); replace it"
        )
    if len(array) != count:
        raise DataError(
            f"{TASK}: {images_path.name} has {count} images but {path.name} has {len(array)} labels; "
            "use matching files"
        )
    if len(array) and int(array.max()) >= NUM_CLASSES:
        raise DataError(f"{TASK}: {path} has label {int(array.max())}, outside 0..{NUM_CLASSES - 1}; replace it")
    return array


def load_mnist(
    data_dir: str | os.PathLike[str] | None, *, allow_custom_data: bool = False, download: bool = True
) -> TaskData:
    """Load MNIST from ``data_dir`` (or the cache folder), downloading the .gz files when missing.

    Images come back as uint8 (N, 1, H, W) with H, W as the files say (28x28 for the official ones).
    """
    folder = task_data_dir(TASK, data_dir)
    found = ensure_files(TASK, folder, official_files(), allow_custom_data=allow_custom_data, download=download)
    train_images_path, train_labels_path, eval_images_path, eval_labels_path = found.paths
    train_x = _images(train_images_path)
    eval_x = _images(eval_images_path)
    if train_x.shape[1:] != eval_x.shape[1:]:
        raise DataError(
            f"{TASK}: train images are {train_x.shape[1]}x{train_x.shape[2]} but test images "
            f"{eval_x.shape[1]}x{eval_x.shape[2]}; use matching files"
        )
    train_y = _labels(train_labels_path, len(train_x), train_images_path)
    eval_y = _labels(eval_labels_path, len(eval_x), eval_images_path)
    return TaskData(
        train_x=torch.from_numpy(train_x).unsqueeze(1),
        train_y=torch.from_numpy(train_y.astype(np.int64)),
        eval_x=torch.from_numpy(eval_x).unsqueeze(1),
        eval_y=torch.from_numpy(eval_y.astype(np.int64)),
        num_classes=NUM_CLASSES,
        official=found.official,
        source=os.path.abspath(folder),  # absolute: `daybreak infer`/`evaluate` find it again from anywhere
        notes=list(found.notes),
    )
