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

Here: :class:`ImageNetData` (the task's data) and :func:`load_imagenet`. Finding the files is
daybreak.data.imagenet_files; the decode pipeline (sharded sampler, workers, transforms),
daybreak.data.imagenet_pipeline.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from daybreak.data.base import TaskData, task_data_dir
from daybreak.data.imagenet_files import TASK, ImageList, scan_train, scan_val
from daybreak.data.imagenet_pipeline import EvalOrder, ImageFiles, PipelineSettings, make_loader, unpack
from daybreak.errors import ChecksumError, ConfigError, DataError

OFFICIAL_TRAIN = 1_281_167
OFFICIAL_VAL = 50_000
OFFICIAL_CLASSES = 1000

WANTED = ("train/<wnid>/*.JPEG and val/ (val/<wnid>/*.JPEG, or the flat val/*.JPEG with LOC_val_solution.csv or "
          "val_labels.txt)")


# --- the task's data ----------------------------------------------------------------------------------------------


@dataclass
class ImageNetData(TaskData):
    """TaskData of ImageNet. Nothing is decoded at load: ``eval_x`` is a shape-only placeholder (a meta tensor
    N x 3 x S x S uint8, what the runner's warm-up needs), ``eval_y`` the real val labels; training batches and
    evaluations stream through DataLoaders, and ``inference_inputs()`` decodes the val set for ``daybreak infer``."""

    root: Path = Path(".")
    classes: list[str] = field(default_factory=list)
    train: ImageList = field(default_factory=lambda: ImageList.of([], []))
    val: ImageList = field(default_factory=lambda: ImageList.of([], []))
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
        return len(self.train)

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


def _placeholder(n: int, size: int) -> torch.Tensor:
    return torch.empty((n, 3, size, size), dtype=torch.uint8, device="meta")


def load_imagenet(data_dir: str | os.PathLike[str] | None, *, allow_custom_data: bool = False,
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
