"""Small pieces shared by recipes: schedules and on-device augmentation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import torch

if TYPE_CHECKING:
    from daybreak.recipes import TrainSetup

Predict = Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]  # eval logits of a model (TrainSetup.predict)


def triangular(peak_fraction: float, start: float = 0.0, end: float = 0.0) -> Callable[[int, int], float]:
    """Learning-rate multiplier rising linearly from ``start`` to 1 at ``peak_fraction`` of training, then to ``end``."""

    def multiplier(step: int, total_steps: int) -> float:
        t = step / max(total_steps, 1)
        if t < peak_fraction:
            return start + (1.0 - start) * t / peak_fraction
        return 1.0 + (end - 1.0) * (t - peak_fraction) / max(1.0 - peak_fraction, 1e-12)

    return multiplier


def constant(step: int, total_steps: int) -> float:
    return 1.0


def cross_entropy_float32(logits: torch.Tensor, labels: torch.Tensor, *, label_smoothing: float = 0.0,
                          reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy computed on float32 logits, whatever dtype the network hands out: the loss of a recipe whose
    network runs in fp16 or bf16 itself (no autocast, which would run the loss in float32 on its own).

    PyTorch computes ``F.cross_entropy`` in the logits' dtype, sums included: with label smoothing its smoothing
    term sums the log-probabilities over the classes and, with ``reduction="sum"``, over the batch, before scaling
    by ``smoothing / classes``. At airbench's optimum (smoothing 0.2, a logit gap of ln(0.82 / 0.02) = 3.71) each
    example adds 35.4 to that sum, so a batch of 2000 reaches 70,800 > 65,504, fp16's largest value: the loss
    *value* is ``inf`` although its gradient (which does not use the forward value) is finite and exact.
    Upcasting [batch, classes] logits costs one small copy; the gradient flows back into the network's dtype.
    User recipes with a half-precision network should compute their loss through this."""
    return torch.nn.functional.cross_entropy(logits.float(), labels, label_smoothing=label_smoothing,
                                             reduction=reduction)


def random_translate(x: torch.Tensor, pad: int, generator: torch.Generator) -> torch.Tensor:
    """Shift each image by up to ``pad`` pixels (zero fill), one random offset per image, on the device."""
    n, _, h, w = x.shape
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    dx = torch.randint(0, 2 * pad + 1, (n,), device=x.device, generator=generator)
    dy = torch.randint(0, 2 * pad + 1, (n,), device=x.device, generator=generator)
    rows = (dy.view(n, 1) + torch.arange(h, device=x.device).view(1, h))  # n,h
    cols = (dx.view(n, 1) + torch.arange(w, device=x.device).view(1, w))  # n,w
    idx_n = torch.arange(n, device=x.device).view(n, 1, 1)
    # gather per image: padded[n, :, rows[n], cols[n]]
    out = padded.permute(0, 2, 3, 1)[idx_n, rows.view(n, h, 1), cols.view(n, 1, w)].permute(0, 3, 1, 2)
    channels_last = x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
    return out.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def random_flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Mirror each image left-right with probability 1/2."""
    flip = torch.rand(x.shape[0], device=x.device, generator=generator) < 0.5
    return torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)


def nesterov_translate_setup(model: torch.nn.Module, hp: dict[str, Any], *,
                             prepare: Callable[[torch.Tensor], torch.Tensor], translate_px: int) -> TrainSetup:
    """The shape the digit recipes share: Nesterov SGD with weight decay, a triangular lr, label-smoothed
    cross-entropy, and (if ``hp["augment"]``) random +-``translate_px`` pixel shifts on the device.

    ``hp`` needs lr, momentum, weight_decay, peak_at, label_smoothing and augment."""
    from daybreak.recipes import TrainSetup

    optimizer = torch.optim.SGD(model.parameters(), lr=hp["lr"], momentum=hp["momentum"], nesterov=True,
                                weight_decay=hp["weight_decay"])

    def augment(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return random_translate(x, translate_px, generator)

    return TrainSetup(
        model=model,
        optimizer=optimizer,
        lr_multiplier=triangular(hp["peak_at"]),
        loss_fn=lambda logits, y: cross_entropy_float32(logits, y, label_smoothing=hp["label_smoothing"]),
        prepare=prepare,
        augment=augment if hp["augment"] else None,
    )


# ---- pieces of Keller Jordan's airbench94 (CIFAR-10), written for daybreak's hooks ------------------------------


def _distributed() -> bool:
    """True inside an initialized process group (torchrun): DDP is then wrapped around the model."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def _compiled_anything() -> bool:
    """True once torch.compile (dynamo) has compiled a frame in this process (the runner counts them the same way)."""
    try:
        from torch._dynamo.utils import counters

        return int(counters["frames"]["total"]) > 0
    except Exception:  # noqa: BLE001 - no dynamo: nothing compiles
        return False


def _like(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """``x`` made contiguous in ``ref``'s memory format (NHWC stays NHWC for cuDNN)."""
    channels_last = ref.dim() == 4 and ref.is_contiguous(memory_format=torch.channels_last) and not ref.is_contiguous()
    return x.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def random_translate_reflect(x: torch.Tensor, pad: int, generator: torch.Generator) -> torch.Tensor:
    """Shift each image by ``dx, dy`` drawn uniformly from ``[-pad, pad]`` (one pair per image, on the device),
    filling the border by reflection: a random 32x32 crop of the image reflect-padded by ``pad`` on each side, as
    airbench's loader does (``F.pad(images, (pad,) * 4, 'reflect')`` then a random crop)."""
    if pad <= 0:
        return x
    n, _, h, w = x.shape
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad), mode="reflect")
    dx = torch.randint(0, 2 * pad + 1, (n,), device=x.device, generator=generator)
    dy = torch.randint(0, 2 * pad + 1, (n,), device=x.device, generator=generator)
    rows = (dy.view(n, 1) + torch.arange(h, device=x.device).view(1, h)).view(n, h, 1)
    cols = (dx.view(n, 1) + torch.arange(w, device=x.device).view(1, w)).view(n, 1, w)
    idx_n = torch.arange(n, device=x.device).view(n, 1, 1)
    # out[i, :, r, c] = padded[i, :, r + dy[i], c + dx[i]]
    out = padded.permute(0, 2, 3, 1)[idx_n, rows, cols].permute(0, 3, 1, 2)
    return _like(out, x)


def tta_predict(mirror: bool, translate: bool) -> Predict | None:
    """Test-time augmentation as airbench94's ``infer`` levels, or None when both are off (plain logits).

    ``mirror`` (level 1): the mean logits of the image and its left-right mirror image. ``translate`` (with
    ``mirror``: level 2) adds two views shifted by one pixel: the image reflect-padded by 1 and cropped at the top
    left (``padded[..., 0:H, 0:W]``) and at the bottom right (``padded[..., 2:H+2, 2:W+2]``), each mirrored too
    when ``mirror``. Weights: 1/2 on the unshifted view(s) and 1/4 on each shifted one, split evenly between an
    image and its mirror; so at level 2, 1/4 on x and on flip(x) and 1/8 on each of the four shifted views."""
    if not mirror and not translate:
        return None

    def views(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:  # averaged in float32 (bf16 logits)
        logits: torch.Tensor = (net(x).float() + net(x.flip(-1)).float()) / 2 if mirror else net(x).float()
        return logits

    def predict(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        logits = views(net, x)
        if not translate:
            return logits
        h, w = x.shape[-2:]
        padded = torch.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect")
        top_left = _like(padded[..., 0:h, 0:w], x)
        bottom_right = _like(padded[..., 2:h + 2, 2:w + 2], x)
        return 0.5 * logits + 0.25 * views(net, top_left) + 0.25 * views(net, bottom_right)

    return predict


def _flip_in_place(images: torch.Tensor, mask: torch.Tensor | None = None, chunk: int = 8192) -> None:
    """Mirror ``images`` left-right in place (those where ``mask`` is True, or all), a chunk at a time so the
    extra memory is one chunk, not a second copy of the training set."""
    for start in range(0, len(images), chunk):
        part = images[start:start + chunk]
        flipped = part.flip(-1)
        if mask is not None:
            flipped = torch.where(mask[start:start + chunk].view(-1, *([1] * (part.dim() - 1))), flipped, part)
        part.copy_(flipped)


class AlternatingFlip:
    """airbench's alternating flip: in the first epoch each training image is mirrored or not at random (a fair
    coin per image, ``batch_flip_lr`` on the whole set), and in every later epoch it is shown the opposite way of
    the epoch before (airbench flips the whole pre-flipped set on odd epochs). So image ``i`` in epoch ``e`` (from
    0) is mirrored iff ``first[i] xor (e odd)``: every image is seen both ways in any two consecutive epochs,
    which random flips only give half the time.

    The runner's batch hook sees a batch, not which images it holds, so this acts on the stored training set: the
    in-memory batch source hands ``init_from_data`` the very tensor of prepared images it slices batches from
    (``InMemoryBatches.start``); ``start(images)`` mirrors the first epoch's images in place and ``next_epoch()``
    (from ``on_epoch_end``) mirrors the whole set in place. A batch source that hands ``init_from_data`` a copy
    would not see the flips. The coins come from ``seed`` on the CPU, so they are the same on every device and
    every rank of a distributed run (each rank stores the whole set), and the same for the same seed.
    """

    def __init__(self, seed: int):
        self.seed = int(seed)
        self.images: torch.Tensor | None = None
        self.first: torch.Tensor | None = None  # bool per image: mirrored in epoch 0
        self.epoch = 0  # the epoch the stored images are arranged for

    def first_epoch_mask(self, n: int) -> torch.Tensor:
        return torch.rand(n, generator=torch.Generator().manual_seed(self.seed)) < 0.5

    def mirrored(self, epoch: int) -> torch.Tensor:
        """Which images are mirrored in ``epoch`` (from 0), as a bool tensor on the CPU."""
        assert self.first is not None, "start() first"
        return self.first.cpu() ^ bool(epoch % 2)

    def start(self, images: torch.Tensor) -> None:
        self.images = images
        self.first = self.first_epoch_mask(len(images)).to(images.device)
        self.epoch = 0
        _flip_in_place(images, self.first)

    def next_epoch(self) -> None:
        if self.images is not None:
            _flip_in_place(self.images)
            self.epoch += 1


class Lookahead:
    """airbench94's ``LookaheadState`` with the averaged weights kept in their own module, for evaluation.

    Every ``every`` optimizer steps the average moves toward the live weights, ``avg <- decay_t * avg + (1 -
    decay_t) * w``, and the live weights are set back to it, ``w <- avg`` (lookahead: training goes on from the
    average). ``decay_t = (decay ** every) * (t / T) ** power`` after step t of T: about 0 early on (the average
    just follows the weights), ``0.95**5 = 0.77`` at the end with airbench's values, so it averages more as the
    learning rate anneals. At the last step the live weights return to the average (airbench's final ``update(model,
    decay=1.0)``). BN running statistics are averaged and copied back like the weights (airbench averages the whole
    float state dict).

    ``module()`` is what a run evaluates and checkpoints: the weights a return to the average would give now.
    As in airbench, when T is not a multiple of ``every`` the steps after the last update are discarded by the
    return to the average (airbench's T = 476 drops its last step). Two details differ from airbench: a run shorter
    than ``every`` steps updates the average once at its last step (airbench would end on its initial weights);
    and parameters that are frozen (``requires_grad`` False or ``frozen(p)``) are copied, not averaged, so a frozen
    parameter stays exactly as it was frozen (airbench lerps them too, which moves its whitening bias once more at
    the first update after freezing it, by about 2% of what its last four trained steps changed).
    """

    def __init__(self, model: torch.nn.Module, every: int = 5, decay: float = 0.95, power: float = 3.0,
                 frozen: Callable[[torch.Tensor], bool] | None = None):
        import copy

        self.model = model
        self.every = max(int(every), 1)
        self.decay = float(decay)
        self.power = float(power)
        self.frozen = frozen or (lambda p: False)
        self.average = copy.deepcopy(model).eval().requires_grad_(False)
        self._params: list[tuple[torch.Tensor, torch.Tensor]] = list(zip(self.average.parameters(),
                                                                          model.parameters()))
        self._buffers: list[tuple[torch.Tensor, torch.Tensor]] = list(zip(self.average.buffers(), model.buffers()))
        self.updates = 0
        self._unsynced = False  # the average's BN statistics changed since module() last broadcast them

    def decay_at(self, steps_done: int, total_steps: int) -> float:
        decay: float = self.decay ** self.every * (steps_done / max(total_steps, 1)) ** self.power
        return decay

    @torch.no_grad()
    def reset(self) -> None:
        """average <- live weights (e.g. after the whitening layer was set from the data)."""
        for avg, live in self._params + self._buffers:
            avg.copy_(live)
        self._unsynced = True

    @torch.no_grad()
    def update(self, decay: float) -> None:
        avgs: list[torch.Tensor] = []
        lives: list[torch.Tensor] = []
        for avg, live in self._params:
            if live.requires_grad and not self.frozen(live):
                avgs.append(avg)
                lives.append(live)
            else:
                avg.copy_(live)
        for avg, live in self._buffers:
            if live.is_floating_point():
                avgs.append(avg)
                lives.append(live)
            else:
                avg.copy_(live)
        if avgs:
            torch._foreach_lerp_(avgs, lives, 1.0 - decay)
            torch._foreach_copy_(lives, avgs)
        self.updates += 1
        self._unsynced = True

    @torch.no_grad()
    def return_to_average(self) -> None:
        """live weights <- average (airbench's ``update(model, decay=1.0)``)."""
        for avg, live in self._params:
            if live.requires_grad and not self.frozen(live):
                live.copy_(avg)
        for avg, live in self._buffers:
            if live.is_floating_point():
                live.copy_(avg)

    def on_step(self, steps_done: int, total_steps: int) -> None:
        last = steps_done >= total_steps
        if steps_done % self.every == 0 or (last and self.updates == 0):
            self.update(self.decay_at(min(steps_done, total_steps), total_steps))
        if last:
            self.return_to_average()

    def module(self) -> torch.nn.Module:
        """The averaged model. In a distributed run every rank takes rank 0's averaged BN statistics (each rank's
        own running statistics differ), as the runner does for the live model before an evaluation; every rank
        calls this at the same points (the runner does), and only the first call after an update communicates."""
        if self._unsynced and _distributed():
            for buffer in self.average.buffers():
                torch.distributed.broadcast(buffer, src=0)
        self._unsynced = False
        return self.average


class FreezeAfterEpochs:
    """Train ``param`` for the first ``epochs`` epochs, then freeze it (airbench's whitening bias:
    ``model[0].bias.requires_grad = (epoch < whiten_bias_epochs)``).

    Normally the parameter stops requiring a gradient, as in airbench (its gradient is no longer computed and the
    optimizer skips it). Two cases keep the gradient and put the parameter back to its frozen value after every
    step (``on_step``) instead -- the same weights, without the saved backward work: under DDP, where a parameter
    may not stop receiving gradients once the model is wrapped (DDP's reducer waits for it and fails the next
    step); and once torch.compile has compiled anything in the process, where changing ``requires_grad`` would
    make the compiled training step compile again inside the clock (airbench94_compiled.py instead warms up a
    second compiled model with the bias frozen, which daybreak's warm-up has no place for).
    ``epochs == 0`` freezes it at once (build it before the optimizer, which then leaves the parameter out)."""

    def __init__(self, param: torch.Tensor, epochs: int):
        self.param = param
        self.epochs = int(epochs)
        self.value: torch.Tensor | None = None
        self.restore = False
        if self.epochs <= 0:  # before any wrapping, so plainly
            self.value = param.detach().clone()
            param.requires_grad_(False)

    @property
    def frozen(self) -> bool:
        return self.value is not None

    def is_frozen(self, p: torch.Tensor) -> bool:
        return self.frozen and p is self.param

    @torch.no_grad()
    def freeze(self) -> None:
        if self.frozen:
            return
        self.value = self.param.detach().clone()
        if _distributed() or _compiled_anything():
            self.restore = True
        else:
            self.param.requires_grad_(False)
            self.param.grad = None

    def on_epoch_end(self, epochs_done: int) -> None:
        if epochs_done >= self.epochs:
            self.freeze()

    @torch.no_grad()
    def on_step(self, steps_done: int, total_steps: int) -> None:
        if self.restore and self.value is not None:
            self.param.copy_(self.value)
