"""ImageNet's decode pipeline: DataLoader worker processes decode and augment while the device trains
(daybreak.data.imagenet).

The pipeline: a seeded sampler gives every rank a disjoint shard of one global order per epoch (the same on every
rank, from the seed); each sample carries its own augmentation seed, so crops do not depend on the number of
workers or ranks. Workers decode with Pillow and crop/resize with one ``Image.resize(box=...)`` (see
daybreak.data.image_transforms) into uint8 H x W x 3; a batch is stacked channels-last, pinned on CUDA and copied
without blocking; uint8 -> float and the mean/std normalization happen on the device (in the recipe's model).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, cast

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from daybreak.data import image_transforms as T
from daybreak.data.imagenet_files import TASK, ImageList
from daybreak.errors import ConfigError, DataError
from daybreak.text import one_line


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


# one decoded image: (uint8 H x W x 3 or None, label, error or None)
Item = tuple[np.ndarray | None, int, str | None]


class ImageFiles(Dataset[Item]):
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

    def __getitem__(self, item: tuple[int, int, int]) -> Item:
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


def collate(items: list[Item]) -> Any:
    """A batch as (N, H, W, 3) uint8 + (N,) int64; or {"error": message} if an image could not be decoded."""
    arrays: list[np.ndarray] = []
    for array, _, err in items:
        if err is not None:
            return {"error": err}
        assert array is not None  # an item without an error holds its image
        arrays.append(array)
    x = torch.from_numpy(np.stack(arrays))
    y = torch.tensor([label for _, label, _ in items], dtype=torch.int64)
    return x, y


def unpack(batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(batch, dict):
        raise DataError(f"{TASK}: cannot decode {batch['error']}")
    return cast(tuple[torch.Tensor, torch.Tensor], batch)  # (what collate makes of images without an error)


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


def make_loader(dataset: Dataset[Any], batch_sampler: Any, settings: PipelineSettings,
                device: torch.device) -> DataLoader[Any]:
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
