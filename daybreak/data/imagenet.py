"""ImageNet (ILSVRC2012) from its JPEG folders, decoded by DataLoader worker processes while the device trains.

Layout of the task folder (``--data-dir D``, default ``$DAYBREAK_DATA/imagenet``)::

    D/train/<wnid>/*.JPEG           1,281,167 images in 1,000 class folders (n01440764, ...)
    D/val/<wnid>/*.JPEG             50,000 images sorted into class folders, or
    D/val/*.JPEG + a label file     the flat validation folder as distributed, with one of (looked up in D, then D/val):
        LOC_val_solution.csv        Kaggle's ImageNet localization file: "ImageId,PredictionString" rows,
                                    the class is the first word of PredictionString ("n01751748 12 34 56 78 ...")
        val_labels.txt              "filename wnid" or "filename index" per line (whitespace-separated; the filename
                                    with or without .JPEG; index = 0-based class index in the order below, the
                                    format of Caffe's val.txt)

The devkit's ILSVRC2012_validation_ground_truth.txt is not supported: its IDs follow the devkit's meta.mat order,
not the wnids; use one of the two files above.

Class index order: the sorted wnids of ``train/`` (n01440764 = 0, ..., n15075141 = 999), the order every common
ImageNet loader uses. Image files: .JPEG/.jpg/.jpeg/.png in any letter case (Pillow reads what the bytes are).

No download: ImageNet needs an account at image-net.org, so a missing folder is a one-line error saying what to
put where. No per-file checksums are published, so the data counts as official when it holds exactly 1,281,167
training and 50,000 validation images in 1,000 classes; anything else (a subset, a re-encoded copy with other
counts) is refused unless ``--allow-custom-data``, and then recorded ``official: false`` (as for every task).

The pipeline: a seeded sampler gives every rank a disjoint shard of one global order per epoch (the same on every
rank, from the seed); each sample carries its own augmentation seed, so crops do not depend on the number of
workers or ranks. Workers decode with Pillow and crop/resize with one ``Image.resize(box=...)`` (see
daybreak.data.image_transforms) into uint8 H x W x 3; a batch is stacked channels-last, pinned on CUDA and copied
without blocking; uint8 -> float and the mean/std normalization happen on the device (in the recipe's model).
"""

from __future__ import annotations

import csv
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from daybreak.data import image_transforms as T
from daybreak.data.base import TaskData, task_data_dir
from daybreak.data.download import one_line
from daybreak.errors import ChecksumError, ConfigError, DataError

TASK = "imagenet"
OFFICIAL_TRAIN = 1_281_167
OFFICIAL_VAL = 50_000
OFFICIAL_CLASSES = 1000
IMAGE_EXTENSIONS = frozenset({".jpeg", ".jpg", ".png"})
LABEL_FILES = ("LOC_val_solution.csv", "val_labels.txt")

WANTED = ("train/<wnid>/*.JPEG and val/ (val/<wnid>/*.JPEG, or the flat val/*.JPEG with LOC_val_solution.csv or "
          "val_labels.txt)")


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


# --- the pipeline -------------------------------------------------------------------------------------------------


@dataclass
class PipelineSettings:
    image_size: int = 224  # training crop size (or the schedule below)
    size_schedule: tuple[tuple[int, int], ...] = ()  # ((first epoch, size), ...) for progressive resizing
    eval_size: int = 224
    eval_resize: int = 256  # shorter side before the central eval_size crop
    min_scale: float = 0.08
    max_scale: float = 1.0
    min_ratio: float = 3 / 4
    max_ratio: float = 4 / 3
    flip: bool = True
    draft: bool = True  # JPEG draft-mode decoding (see image_transforms)
    workers: int = -1  # decoding processes per rank; -1: automatic
    prefetch: int = 4  # batches each worker keeps ready
    eval_batch_size: int = 256

    def size_for_epoch(self, epoch: int) -> int:
        size = self.image_size
        for first, s in self.size_schedule:
            if epoch >= first:
                size = s
        return size

    def resolved_workers(self) -> int:
        if self.workers >= 0:
            return self.workers
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        return max(1, min(16, (os.cpu_count() or 2) // max(local, 1) - 1))


def parse_size_schedule(text: str) -> tuple[tuple[int, int], ...]:
    """"0:128,10:224,30:288" -> ((0, 128), (10, 224), (30, 288)): from epoch 0 train at 128, from 10 at 224, ..."""
    text = text.strip()
    if not text:
        return ()
    out = []
    for part in text.split(","):
        try:
            first, size = (int(v) for v in part.split(":"))
        except ValueError:
            raise ConfigError(f"size_schedule {text!r}: expected EPOCH:SIZE pairs, e.g. 0:128,10:224") from None
        if first < 0 or size < 8:
            raise ConfigError(f"size_schedule {text!r}: epochs must be >= 0 and sizes >= 8")
        out.append((first, size))
    if [f for f, _ in out] != sorted({f for f, _ in out}):
        raise ConfigError(f"size_schedule {text!r}: epochs must increase")
    return tuple(out)


class ImageFiles(Dataset):
    """``dataset[(index, seed, size)]`` -> (uint8 H x W x 3 or None, label, error or None).

    ``seed`` >= 0: training transform (random crop + flip drawn from ``random.Random(seed)``); ``seed`` < 0: the
    eval transform at ``size``. Decode errors come back as values (the collate turns them into one-line errors in
    the training process) instead of exceptions with worker tracebacks.
    """

    def __init__(self, root: Path, images: ImageList, settings: PipelineSettings):
        self.root = os.fsencode(root)
        self.images = images
        self.s = settings

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, item: tuple[int, int, int]) -> tuple[np.ndarray | None, int, str | None]:
        index, seed, size = item
        path = os.path.join(self.root, self.images.paths[index])
        label = int(self.images.labels[index])
        s = self.s
        try:
            with T.open_image(os.fsdecode(path)) as image:
                if seed >= 0:
                    array = T.train_transform(image, size, random.Random(seed), scale=(s.min_scale, s.max_scale),
                                              ratio=(s.min_ratio, s.max_ratio), flip=s.flip, draft=s.draft)
                else:
                    resize = max(size, int(round(size * s.eval_resize / s.eval_size)))
                    array = T.eval_transform(image, size, resize, draft=s.draft)
        except Exception as err:  # noqa: BLE001 - any decode failure of one file: report it, by name
            return None, label, f"{os.fsdecode(path)}: {one_line(err)}"
        return array, label, None


def collate(items: list[tuple[np.ndarray | None, int, str | None]]) -> Any:
    """A batch as (N, H, W, 3) uint8 + (N,) int64; or {"error": message} if an image could not be decoded."""
    for _, _, err in items:
        if err is not None:
            return {"error": err}
    x = torch.from_numpy(np.stack([a for a, _, _ in items]))
    y = torch.tensor([label for _, label, _ in items], dtype=torch.int64)
    return x, y


def unpack(batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(batch, dict):
        raise DataError(f"{TASK}: cannot decode {batch['error']}")
    return batch


class ShardedBatches:
    """Batch sampler: a global permutation per epoch from (seed, epoch), the same on every rank; step i of rank r
    takes positions [i * G + r * B, i * G + (r + 1) * B) of it (G = world x B). Items are (index, augmentation
    seed, image size), the augmentation seed a function of (seed, epoch, position) only."""

    def __init__(self, n: int, batch_size: int, world: int, rank: int, seed: int, settings: PipelineSettings):
        self.n, self.batch_size, self.world, self.rank, self.seed = n, batch_size, world, rank, seed
        self.global_batch = batch_size * world
        self.steps = max(n // self.global_batch, 1)
        self.settings = settings
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[list[tuple[int, int, int]]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(self.n)
        aug = rng.integers(0, 2**62, size=self.n)
        size = self.settings.size_for_epoch(self.epoch)
        for i in range(self.steps):
            start = i * self.global_batch + self.rank * self.batch_size
            yield [(int(order[p % self.n]), int(aug[p % self.n]), size) for p in range(start, start + self.batch_size)]


def make_loader(dataset: Dataset, batch_sampler: Any, settings: PipelineSettings, device: torch.device) -> DataLoader:
    workers = settings.resolved_workers()
    return DataLoader(
        dataset, batch_sampler=batch_sampler, num_workers=workers, collate_fn=collate,
        pin_memory=device.type == "cuda", persistent_workers=workers > 0,
        prefetch_factor=settings.prefetch if workers > 0 else None,
    )


def to_device(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """(N, H, W, 3) uint8 on the host -> (N, 3, H, W) channels-last uint8 on the device (no copy of the layout)."""
    return x.to(device, non_blocking=device.type == "cuda").permute(0, 3, 1, 2)


class EvalOrder:
    """Batch sampler over fixed indices (this rank's share of the val set) at the eval size."""

    def __init__(self, indices: list[int], batch_size: int, size: int):
        self.indices, self.batch_size, self.size = indices, batch_size, size

    def __len__(self) -> int:
        return (len(self.indices) + self.batch_size - 1) // self.batch_size

    def __iter__(self) -> Iterator[list[tuple[int, int, int]]]:
        for i in range(0, len(self.indices), self.batch_size):
            yield [(j, -1, self.size) for j in self.indices[i : i + self.batch_size]]



# --- the task's data ----------------------------------------------------------------------------------------------


@dataclass
class ImageNetData(TaskData):
    """TaskData of ImageNet. Nothing is decoded at load: ``eval_x`` is a shape-only placeholder (a meta tensor
    N x 3 x S x S uint8, what the runner's warm-up needs), ``eval_y`` the real val labels; training batches and
    evaluations stream through DataLoaders, and ``inference_inputs()`` decodes the val set for ``daybreak infer``."""

    root: Path = Path(".")
    classes: list[str] = field(default_factory=list)
    train: ImageList | None = None  # type: ignore[assignment]
    val: ImageList | None = None  # type: ignore[assignment]
    settings: PipelineSettings = field(default_factory=PipelineSettings)

    def configure(self, settings: PipelineSettings) -> None:
        """The recipe's crop sizes, augmentation and loader settings; re-shapes the eval placeholder."""
        if settings.eval_resize < settings.eval_size:
            raise ConfigError(f"eval_resize={settings.eval_resize} is smaller than eval_size={settings.eval_size}")
        if not (0 < settings.min_scale <= settings.max_scale <= 1 and 0 < settings.min_ratio <= settings.max_ratio):
            raise ConfigError("crop scale must satisfy 0 < min_scale <= max_scale <= 1 and ratios 0 < min <= max")
        self.settings = settings
        self.eval_x = _placeholder(len(self.eval_y), settings.eval_size)

    @torch.inference_mode()
    def inference_inputs(self) -> torch.Tensor:
        """Every val image through the eval transform: (N, 3, S, S) uint8, channels-last, in eval_y's order."""
        assert self.val is not None
        s = self.settings
        order = EvalOrder(list(range(len(self.val))), s.eval_batch_size, s.eval_size)
        loader = make_loader(ImageFiles(self.root, self.val, s), order, s, torch.device("cpu"))
        out = torch.empty((len(self.val), s.eval_size, s.eval_size, 3), dtype=torch.uint8)
        i = 0
        for batch in loader:
            x, _ = unpack(batch)
            out[i : i + len(x)] = x
            i += len(x)
        return out.permute(0, 3, 1, 2)

    def train_size(self) -> int:
        """Training images (what a per-device batch is capped by)."""
        return len(self.train) if self.train is not None else 0

    def example_train_batch(self, n: int, epoch: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """A training batch of ``n`` examples with the shape, dtype and layout the pipeline gives at ``epoch``
        ((n, 3, S, S) uint8, channels-last, S = that epoch's crop size): for counting FLOPs and bytes of a step
        (``daybreak analyze roofline``), which do not depend on the pixels. Nothing is decoded."""
        size = self.settings.size_for_epoch(epoch)
        x = torch.zeros((n, size, size, 3), dtype=torch.uint8).permute(0, 3, 1, 2)
        y = torch.arange(n, dtype=torch.int64) % max(self.num_classes, 1)
        return x, y

    @classmethod
    def stand_in(cls, num_classes: int = OFFICIAL_CLASSES) -> "ImageNetData":
        """Shapes only, no files: what a recipe needs to build its model when the images are not on this machine
        (``daybreak analyze roofline`` of a run made elsewhere). Its sets are empty."""
        empty = ImageList.of([], [])
        classes = [f"class{i:04d}" for i in range(num_classes)]
        settings = PipelineSettings()
        return cls(train_x=None, train_y=None, eval_x=_placeholder(0, settings.eval_size),
                   eval_y=torch.zeros(0, dtype=torch.int64), num_classes=num_classes, official=False,
                   source="", notes=["stand-in without files"], root=Path("."), classes=classes, train=empty,
                   val=empty, settings=settings)


def folder_of_source(source: str) -> Path | None:
    """The folder to read again for a run whose ``data_source`` is ``source`` (the folder itself)."""
    return Path(source) if source else None


def _placeholder(n: int, size: int) -> torch.Tensor:
    return torch.empty((n, 3, size, size), dtype=torch.uint8, device="meta")


def load_imagenet(data_dir: str | os.PathLike | None, *, allow_custom_data: bool = False,
                  download: bool = True) -> ImageNetData:
    """List the ImageNet folders in ``data_dir`` (or the cache folder) and check their counts; decode nothing."""
    folder = task_data_dir(TASK, data_dir)
    missing = [f"{name}/" for name in ("train", "val") if not (folder / name).is_dir()]
    if missing:
        raise DataError(f"{TASK}: no {' and '.join(missing)} in {folder}; ImageNet cannot be downloaded automatically "
                        f"(it needs a login at image-net.org): put {WANTED} there, or pass --data-dir")
    classes, train = scan_train(folder)
    val, layout = scan_val(folder, classes)
    counts = f"{len(train):,} train / {len(val):,} val images in {len(classes):,} classes"
    official = len(train) == OFFICIAL_TRAIN and len(val) == OFFICIAL_VAL and len(classes) == OFFICIAL_CLASSES
    notes = [f"{counts} ({layout}); ILSVRC2012 publishes no per-file checksums, so official = exactly "
             f"{OFFICIAL_TRAIN:,} / {OFFICIAL_VAL:,} / {OFFICIAL_CLASSES:,}"]
    if not official:
        if not allow_custom_data:
            raise ChecksumError(f"{TASK}: {folder} holds {counts}, not ILSVRC2012's {OFFICIAL_TRAIN:,} / "
                                f"{OFFICIAL_VAL:,} / {OFFICIAL_CLASSES:,}; pass --allow-custom-data to use it anyway "
                                "(the run is recorded official: false)")
        notes.append(f"custom data: {counts}, not the official counts (--allow-custom-data)")
    eval_y = torch.from_numpy(val.labels.copy())
    settings = PipelineSettings()
    data = ImageNetData(
        train_x=None, train_y=None, eval_x=_placeholder(len(val), settings.eval_size), eval_y=eval_y,
        num_classes=len(classes), official=official, source=os.path.abspath(folder), notes=notes,
        root=Path(os.path.abspath(folder)), classes=classes, train=train, val=val, settings=settings,
    )
    return data
