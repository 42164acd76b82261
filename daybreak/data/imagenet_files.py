"""Finding ImageNet's files: the class folders of train/, the validation images in either layout and their label
file (the layout is described in daybreak.data.imagenet). Nothing is decoded here."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from daybreak.errors import DataError
from daybreak.text import one_line

TASK = "imagenet"
IMAGE_EXTENSIONS = frozenset({".jpeg", ".jpg", ".png"})
LABEL_FILES = ("LOC_val_solution.csv", "val_labels.txt")


# --- finding the files ---------------------------------------------------------------------------------------------


def _images_in(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries
                          if os.path.splitext(e.name)[1].lower() in IMAGE_EXTENSIONS and e.is_file())
    except OSError as err:
        raise DataError(f"{TASK}: cannot list {folder}: {one_line(err)}") from err


def _subdirs(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries if e.is_dir() and not e.name.startswith("."))
    except OSError as err:
        raise DataError(f"{TASK}: cannot list {folder}: {one_line(err)}") from err


def _stem(name: str) -> str:
    base, ext = os.path.splitext(name)
    return base if ext.lower() in IMAGE_EXTENSIONS else name


def find_label_file(folder: Path) -> Path | None:
    for where in (folder, folder / "val"):
        for name in LABEL_FILES:
            if (where / name).is_file():
                return where / name
    return None


def read_label_file(path: Path, classes: list[str]) -> dict[str, int]:
    """Image stem -> class index, from LOC_val_solution.csv or a 'filename wnid|index' text file."""
    index = {wnid: i for i, wnid in enumerate(classes)}
    labels: dict[str, int] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{TASK}: cannot read {path}: {one_line(err)}") from err
    if path.suffix.lower() == ".csv":
        rows = csv.reader(text.splitlines())
        header = next(rows, None)
        if header is None or "ImageId" not in header or "PredictionString" not in header:
            raise DataError(f"{TASK}: {path} has no 'ImageId,PredictionString' header; is it LOC_val_solution.csv?")
        col_id, col_pred = header.index("ImageId"), header.index("PredictionString")
        for line, row in enumerate(rows, start=2):
            if not row:
                continue
            if len(row) <= max(col_id, col_pred) or not row[col_pred].split():
                raise DataError(f"{TASK}: {path} line {line}: expected 'ImageId,PredictionString'")
            wnid = row[col_pred].split()[0]
            if wnid not in index:
                raise DataError(f"{TASK}: {path} line {line}: class {wnid} is not a folder of train/")
            labels[_stem(row[col_id].strip())] = index[wnid]
        return labels
    for line, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 2:
            raise DataError(
                f"{TASK}: {path} line {line}: expected 'filename wnid' or 'filename index'; the devkit's "
                "ILSVRC2012_validation_ground_truth.txt (meta.mat IDs) is not supported, use LOC_val_solution.csv"
            )
        name, label = fields
        if label in index:
            labels[_stem(name)] = index[label]
        elif label.isdigit() and int(label) < len(classes):
            labels[_stem(name)] = int(label)
        else:
            raise DataError(f"{TASK}: {path} line {line}: {label!r} is neither a wnid of train/ nor a class index "
                            f"0..{len(classes) - 1}")
    return labels


@dataclass
class ImageList:
    """Image paths relative to the data folder (bytes, one numpy buffer: cheap to share with forked workers)
    and their class indices."""

    paths: np.ndarray  # dtype S
    labels: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.labels)

    @classmethod
    def of(cls, paths: list[str], labels: list[int]) -> "ImageList":
        encoded = [os.fsencode(p) for p in paths]
        return cls(np.array(encoded, dtype=f"S{max((len(p) for p in encoded), default=1)}"),
                   np.asarray(labels, dtype=np.int64))


def scan_train(folder: Path) -> tuple[list[str], ImageList]:
    train_dir = folder / "train"
    classes = _subdirs(train_dir)
    if not classes:
        raise DataError(f"{TASK}: {train_dir} has no class folders (train/<wnid>/*.JPEG)")
    paths: list[str] = []
    labels: list[int] = []
    for i, wnid in enumerate(classes):
        names = _images_in(train_dir / wnid)
        paths += [f"train/{wnid}/{name}" for name in names]
        labels += [i] * len(names)
    if not paths:
        raise DataError(f"{TASK}: {train_dir} has class folders but no images (.JPEG/.jpg/.png)")
    return classes, ImageList.of(paths, labels)


def scan_val(folder: Path, classes: list[str]) -> tuple[ImageList, str]:
    """The validation images and labels, from either layout; returns (list, a description of the layout)."""
    val_dir = folder / "val"
    index = {wnid: i for i, wnid in enumerate(classes)}
    per_class = {d: names for d in _subdirs(val_dir) if (names := _images_in(val_dir / d))}
    if per_class:
        unknown = [d for d in per_class if d not in index]
        if unknown:
            raise DataError(f"{TASK}: {val_dir / unknown[0]} is not a class of train/ "
                            f"({len(unknown)} such folder(s) in val/)")
        paths = [f"val/{wnid}/{name}" for wnid, names in per_class.items() for name in names]
        labels = [index[wnid] for wnid, names in per_class.items() for _ in names]
        return ImageList.of(paths, labels), "val/<wnid>/ folders"
    names = _images_in(val_dir)
    if not names:
        raise DataError(f"{TASK}: {val_dir} has no images (val/<wnid>/*.JPEG or val/*.JPEG)")
    label_file = find_label_file(folder)
    if label_file is None:
        raise DataError(f"{TASK}: {val_dir} is the flat layout but no label file was found; put "
                        f"{' or '.join(LABEL_FILES)} into {folder} (see `daybreak tasks`)")
    table = read_label_file(label_file, classes)
    missing = [n for n in names if _stem(n) not in table]
    if missing:
        raise DataError(f"{TASK}: {len(missing)} image(s) of {val_dir} have no label in {label_file} "
                        f"(first: {missing[0]})")
    return ImageList.of([f"val/{n}" for n in names], [table[_stem(n)] for n in names]), f"flat val/ + {label_file.name}"
