"""ImageNet-style image transforms in plain Pillow + numpy: decode, crop box, one resize, uint8 HWC out.

Every transform computes a crop box in the original image's coordinates and makes the output with a single
``Image.resize(size, box=...)`` (Pillow resamples only the box, with antialiasing when it shrinks): no full-size
intermediate image is ever made. Outputs are uint8 arrays H x W x 3 (RGB); a stack of them is already the
channels-last layout, and the model side does uint8 -> float and the mean/std normalization on the device.

- training: ``random_resized_crop_box`` (Inception-style: area fraction uniform in ``scale``, log aspect ratio
  uniform in ``ratio``, 10 attempts, then a center crop clamped to the ratio range) + horizontal flip with p = 1/2;
- evaluation: ``center_crop_box``: resize so the shorter side is ``resize`` (256 for 224), then the central
  ``size`` x ``size`` square.

JPEG draft mode (``draft=True``): Pillow can decode a JPEG at 1/2, 1/4 or 1/8 scale directly from the DCT
coefficients, much faster than a full decode. The scale is chosen so that the crop box still holds at least
``size`` x ``size`` pixels, so the final resize never enlarges what the draft shrank; the box is rescaled to the
drafted image. Off, every image is decoded at full size (exact reference behavior; slower).
"""

from __future__ import annotations

import math
import random
import numpy as np
from PIL import Image

BoxF = tuple[float, float, float, float]  # left, top, right, bottom (Pillow's box convention)

DEFAULT_SCALE = (0.08, 1.0)
DEFAULT_RATIO = (3 / 4, 4 / 3)
RESAMPLE = Image.Resampling.BILINEAR


def random_resized_crop_box(width: int, height: int, rng: random.Random, scale: tuple[float, float] = DEFAULT_SCALE,
                            ratio: tuple[float, float] = DEFAULT_RATIO, attempts: int = 10) -> tuple[int, int, int, int]:
    """(left, top, crop width, crop height) of a random crop: area ``scale`` x the image's, aspect w/h in ``ratio``
    (sampled log-uniformly). After ``attempts`` draws that do not fit, the central crop with the image's own aspect
    ratio clamped into ``ratio`` is used."""
    area = width * height
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(attempts):
        target = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_lo, log_hi))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, width - w), rng.randint(0, height - h), w, h
    aspect = width / height
    if aspect < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif aspect > max(ratio):
        w, h = int(round(height * max(ratio))), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def resized_size(width: int, height: int, shorter: int) -> tuple[int, int]:
    """Size after resizing so that the shorter side is ``shorter`` (the longer side truncated to an integer)."""
    if width <= height:
        return shorter, int(shorter * height / width)
    return int(shorter * width / height), shorter


def center_crop_box(width: int, height: int, size: int, resize: int) -> BoxF:
    """The box, in original coordinates, that resize-shorter-side-to-``resize`` then center-crop-``size`` keeps.

    The resized image is ``resized_size(...)``; the crop starts at round((resized - size) / 2) on each axis. The
    box maps that square back through each axis' own scale factor, so one resize of the box gives the same pixels'
    geometry as the two-step resize + crop.
    """
    new_w, new_h = resized_size(width, height, resize)
    if size > new_w or size > new_h:
        raise ValueError(f"crop {size} is larger than the resized image {new_w}x{new_h}")
    left = int(round((new_w - size) / 2.0))
    top = int(round((new_h - size) / 2.0))
    sx, sy = width / new_w, height / new_h
    return left * sx, top * sy, (left + size) * sx, (top + size) * sy


def open_image(path: str) -> Image.Image:
    """Open lazily (reads the header only); ``load_crop`` decodes."""
    return Image.open(path)


def load_crop(image: Image.Image, box: BoxF, size: int, *, draft: bool = True) -> Image.Image:
    """The ``box`` region of ``image`` resized to ``size`` x ``size``, RGB."""
    left, top, right, bottom = box
    if draft and image.format == "JPEG":
        width, height = image.size
        want = (max(1, math.ceil(width * size / max(right - left, 1e-6))),
                max(1, math.ceil(height * size / max(bottom - top, 1e-6))))
        if want[0] < width and want[1] < height:
            image.draft("RGB", want)
            sx, sy = image.size[0] / width, image.size[1] / height
            box = (left * sx, top * sy, right * sx, bottom * sy)
    if image.mode != "RGB":
        image = image.convert("RGB")
    return image.resize((size, size), RESAMPLE, box=box)


def to_array(image: Image.Image) -> np.ndarray:
    """H x W x 3 uint8 (a fresh, writable array)."""
    return np.array(image, dtype=np.uint8, copy=True)


def train_transform(image: Image.Image, size: int, rng: random.Random, *, scale: tuple[float, float] = DEFAULT_SCALE,
                    ratio: tuple[float, float] = DEFAULT_RATIO, flip: bool = True, draft: bool = True) -> np.ndarray:
    """RandomResizedCrop to ``size`` + random horizontal flip; uint8 H x W x 3."""
    left, top, w, h = random_resized_crop_box(image.size[0], image.size[1], rng, scale, ratio)
    out = load_crop(image, (left, top, left + w, top + h), size, draft=draft)
    if flip and rng.random() < 0.5:
        out = out.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return to_array(out)


def eval_transform(image: Image.Image, size: int, resize: int, *, draft: bool = True) -> np.ndarray:
    """Resize the shorter side to ``resize``, take the central ``size`` square; uint8 H x W x 3."""
    box = center_crop_box(image.size[0], image.size[1], size, resize)
    return to_array(load_crop(image, box, size, draft=draft))

