"""Writers of tiny, learnable datasets in the real MNIST (IDX) and CIFAR-10 (python pickle) formats.

Used by the tests, and by anyone who wants to try the mnist/cifar10 tasks offline: point ``--data-dir`` at the
folder and pass ``--allow-custom-data`` (the files do not match the official checksums, so the run is recorded
``official: false``). Each class gets a fixed random pattern and every image is that pattern plus noise, so a
small CNN learns them quickly.
"""

from __future__ import annotations

import gzip as gzip_module
import io
import os
import pickle
import tarfile
from pathlib import Path
from typing import Any

import numpy as np

from daybreak.data import cifar10, mnist
from daybreak.fileio import atomic_write, atomic_write_bytes

NUM_CLASSES = 10
CIFAR10_LABEL_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
_IDX_CODES = {dtype.newbyteorder("=").str.lstrip("<>|="): code for code, dtype in mnist.IDX_DTYPES.items()}


def idx_bytes(array: np.ndarray) -> bytes:
    """The IDX encoding of ``array`` (dtype uint8, int8, int16, int32, float32 or float64)."""
    array = np.asarray(array)
    kind = array.dtype.str.lstrip("<>|=")
    if kind not in _IDX_CODES:
        raise ValueError(f"IDX cannot store dtype {array.dtype}")
    code = _IDX_CODES[kind]
    header = bytes([0, 0, code, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.astype(mnist.IDX_DTYPES[code], copy=False).tobytes(order="C")


def write_idx(path: str | os.PathLike[str], array: np.ndarray, gzip: bool) -> Path:
    """Write ``array`` as an IDX file, gzip-compressed if ``gzip`` (deterministic bytes: mtime 0)."""
    data = idx_bytes(array)
    if gzip:
        data = gzip_module.compress(data, mtime=0)
    return atomic_write_bytes(path, data)


def _class_patterns(rng: np.random.Generator, channels: int, size: int, cells: int) -> np.ndarray:
    """One on/off pattern per class: a random ``cells`` x ``cells`` grid scaled up to ``size`` x ``size``."""
    grid = rng.random((NUM_CLASSES, channels, cells, cells)) < 0.5
    index = np.arange(size) * cells // size
    return grid[:, :, index][:, :, :, index]  # (classes, channels, size, size)


def _balanced_labels(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.permutation(np.arange(n) % NUM_CLASSES).astype(np.uint8)


def _render(rng: np.random.Generator, patterns: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Images (n, channels, size, size) uint8: the class pattern at a random brightness, plus noise."""
    brightness = rng.integers(150, 230, size=(len(labels), 1, 1, 1))
    noise = rng.integers(0, 60, size=(len(labels), *patterns.shape[1:]))
    images: np.ndarray = (patterns[labels] * brightness + noise).clip(0, 255).astype(np.uint8)
    return images


def synthetic_images(n: int, *, rng: np.random.Generator, patterns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    labels = _balanced_labels(rng, n)
    return _render(rng, patterns, labels), labels


def write_mnist(folder: str | os.PathLike[str], n_train: int, n_test: int, *, gzip: bool = True, seed: int = 0,
                image_size: int = 28) -> dict[str, Any]:
    """Write the four MNIST IDX files (``*.gz`` if ``gzip``) into ``folder``.

    Returns ``train_x`` (n, H, W) uint8, ``train_y``, ``test_x``, ``test_y`` (uint8) and ``files``
    (file name -> path).
    """
    folder = Path(folder)
    rng = np.random.default_rng(seed)
    patterns = _class_patterns(rng, 1, image_size, 7)
    train_x, train_y = synthetic_images(n_train, rng=rng, patterns=patterns)
    test_x, test_y = synthetic_images(n_test, rng=rng, patterns=patterns)
    arrays = {
        mnist.TRAIN_IMAGES: train_x[:, 0], mnist.TRAIN_LABELS: train_y,
        mnist.EVAL_IMAGES: test_x[:, 0], mnist.EVAL_LABELS: test_y,
    }
    suffix = ".gz" if gzip else ""
    files = {name + suffix: write_idx(folder / (name + suffix), array, gzip) for name, array in arrays.items()}
    return {"train_x": train_x[:, 0], "train_y": train_y, "test_x": test_x[:, 0], "test_y": test_y, "files": files}


def _batch_pickle(x: np.ndarray, y: np.ndarray, batch_label: str, first_index: int, protocol: int) -> bytes:
    batch = {
        b"batch_label": batch_label.encode(),
        b"labels": [int(label) for label in y],
        b"data": np.ascontiguousarray(x.reshape(len(x), -1)),
        b"filenames": [f"synthetic_{first_index + i:06d}.png".encode() for i in range(len(x))],
    }
    return pickle.dumps(batch, protocol=protocol)


def _meta_pickle(n_per_batch: int, protocol: int) -> bytes:
    meta = {b"num_cases_per_batch": n_per_batch, b"label_names": [name.encode() for name in CIFAR10_LABEL_NAMES],
            b"num_vis": cifar10.ROW_BYTES}
    return pickle.dumps(meta, protocol=protocol)


def _write_tarball(path: Path, members: dict[str, bytes]) -> Path:
    def write(out: Any) -> None:
        with gzip_module.GzipFile(fileobj=out, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(f"{cifar10.BATCHES_DIR}/{name}")
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                tar.addfile(info, io.BytesIO(data))

    return atomic_write(path, write)


def write_cifar10(folder: str | os.PathLike[str], n_train_per_batch: int, n_test: int, *, as_tarball: bool = True,
                  seed: int = 0, pickle_protocol: int = 2) -> dict[str, Any]:
    """Write a CIFAR-10 python distribution into ``folder``: ``cifar-10-python.tar.gz`` holding
    ``cifar-10-batches-py/...`` if ``as_tarball``, else the extracted ``cifar-10-batches-py/`` folder.

    Returns ``train_x`` (5 * n_train_per_batch, 3, 32, 32) uint8, ``train_y``, ``test_x``, ``test_y`` and
    ``path`` (the tarball or the batches folder).
    """
    folder = Path(folder)
    rng = np.random.default_rng(seed)
    patterns = _class_patterns(rng, 3, 32, 4)
    members: dict[str, bytes] = {"batches.meta": _meta_pickle(n_train_per_batch, pickle_protocol)}
    xs, ys = [], []
    for i, name in enumerate(cifar10.TRAIN_BATCHES):
        x, y = synthetic_images(n_train_per_batch, rng=rng, patterns=patterns)
        members[name] = _batch_pickle(x, y, f"training batch {i + 1} of 5", i * n_train_per_batch, pickle_protocol)
        xs.append(x)
        ys.append(y)
    test_x, test_y = synthetic_images(n_test, rng=rng, patterns=patterns)
    members[cifar10.EVAL_BATCH] = _batch_pickle(test_x, test_y, "testing batch 1 of 1", 0, pickle_protocol)

    if as_tarball:
        path = _write_tarball(folder / cifar10.TARBALL_NAME, members)
    else:
        path = folder / cifar10.BATCHES_DIR
        for name, data in members.items():
            atomic_write_bytes(path / name, data)
    return {"train_x": np.concatenate(xs), "train_y": np.concatenate(ys), "test_x": test_x, "test_y": test_y,
            "path": path}
