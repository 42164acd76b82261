"""The cifar10 recipes (airbench94, airbench94_muon and airbench96's methods) and their networks, on CPU with tiny
synthetic uint8 images (no CIFAR files): the networks, whitening, optimizer groups and schedules, Muon, each airbench
piece behind its switch (lookahead, whitening bias freeze, alternating flip, flip/translate TTA, fp16, cutout), and
tiny end-to-end runs through the runner with the hooks on."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F

from daybreak.data.base import TaskData
from daybreak.models import count_parameters, create_model
from daybreak.recipes import get_recipe
from daybreak.recipes.cifar10 import SWITCHES
from daybreak.recipes.common import AlternatingFlip
from daybreak.records.run import RESULT_FILE, RunResult
from daybreak.tasks import TASKS
from daybreak.tasks.batches import BatchPlan, InMemoryBatches
from daybreak.train.distributed import DistContext
from daybreak.train.runner import RunConfig, run
from daybreak.train.step import Backend, TrainStep

CPU = torch.device("cpu")
AIRBENCH_NET_PARAMETERS = 1_972_792  # see test_parameter_count for the sum


def tiny_cifar(n_train: int = 64, n_eval: int = 32, seed: int = 0) -> TaskData:
    """Smooth, channel-correlated uint8 images plus some pixel noise: their 2x2 patches are far from white, and
    the smallest patch-covariance eigenvalue (~0.1) is well above the whitening eps (5e-4), so that whitening
    gives an identity covariance to within 1%."""
    g = torch.Generator().manual_seed(seed)

    def images(n: int) -> torch.Tensor:
        coarse = torch.rand(n, 1, 8, 8, generator=g) * 0.5 + torch.rand(n, 3, 8, 8, generator=g) * 0.2
        smooth = F.interpolate(coarse, size=(32, 32), mode="bilinear", align_corners=False)
        noisy = smooth + 0.3 * torch.rand(n, 3, 32, 32, generator=g)
        return (noisy * 255).round().clamp(0, 255).to(torch.uint8)

    return TaskData(
        train_x=images(n_train), train_y=torch.randint(0, 10, (n_train,), generator=g),
        eval_x=images(n_eval), eval_y=torch.randint(0, 10, (n_eval,), generator=g),
        num_classes=10, source="synthetic test data",
    )


@pytest.fixture(scope="module")
def data() -> TaskData:
    return tiny_cifar()


def build(data: TaskData, **overrides):
    recipe = get_recipe("cifar10")
    torch.manual_seed(0)
    return recipe.build(recipe.hyperparameters({"batch_size": 32, **overrides}), data, CPU)


def train(setup, x: torch.Tensor, y: torch.Tensor, *, epochs: int, batch: int, model=None, seed: int = 0,
          before_hooks=None, after_step=None) -> int:
    """The runner's loop in small (see daybreak.train.runner._train): lr schedule, TrainStep, on_step after each
    step, on_epoch_end after each epoch. ``before_hooks(step)`` runs after the optimizer step and before
    on_step; ``after_step(step, epoch)`` after the hooks. Returns the steps done."""
    steps_per_epoch = len(x) // batch
    total = steps_per_epoch * epochs
    base = [g["lr"] for g in setup.optimizer.param_groups]
    step_fn = TrainStep(model or setup.model, setup.optimizer, setup.loss_fn, Backend(CPU, "off"))
    gen = torch.Generator().manual_seed(seed)
    step_fn.model.train()
    step = 0
    for epoch in range(epochs):
        perm = torch.randperm(len(x), generator=gen)
        for i in range(steps_per_epoch):
            idx = perm[i * batch : (i + 1) * batch]
            xb = setup.augment(x[idx], gen) if setup.augment is not None else x[idx]
            for group, lr in zip(setup.optimizer.param_groups, base):
                group["lr"] = lr * setup.lr_multiplier(step, total)
            loss = step_fn(xb, y[idx])
            assert math.isfinite(loss.item())
            step += 1
            if before_hooks is not None:
                before_hooks(step)
            if setup.on_step is not None:
                setup.on_step(step, total)
            if after_step is not None:
                after_step(step, epoch)
        if setup.on_epoch_end is not None:
            setup.on_epoch_end(epoch + 1)
    return step


def started(data: TaskData, **overrides):
    """A built setup after init_from_data, with the prepared training images it was handed."""
    setup = build(data, **overrides)
    x = setup.prepare(data.train_x)
    if setup.init_from_data is not None:
        setup.init_from_data(x, data.train_y)
    return setup, x


def patches(x: torch.Tensor) -> torch.Tensor:
    """All 2x2x3 patches, flattened in the conv weight's (C, kh, kw) order."""
    return x.unfold(2, 2, 1).unfold(3, 2, 1).permute(0, 2, 3, 1, 4, 5).reshape(-1, 12)


def test_recipe_registered_and_switches_are_boolean_hyperparameters():
    recipe = get_recipe("cifar10")
    assert recipe.task == "cifar10" and recipe.model == "airbench_net" and recipe.batch_scaling == "global"
    assert "\n" not in recipe.summary
    assert recipe.defaults["batch_size"] == 1024 and recipe.defaults["label_smoothing"] == 0.2
    assert set(recipe.switches) == {"augment", "alternating_flip", "tta", "tta_translate", "lookahead",
                                    "whiten_bias_freeze", "label_smoothing_on", "whitening", "channels_last",
                                    "fp16", "cudnn_benchmark"}
    assert recipe.builds_from_spec  # built, compiled and warmed up before the data
    for name in recipe.switches:
        assert recipe.defaults[name] is True
    # airbench94's values (legacy/airbench94.py in KellerJordan/airbench)
    d = recipe.defaults
    assert (d["warmup"], d["lr_start"], d["lr_end"], d["momentum"]) == (0.23, 0.2, 0.07, 0.85)
    assert (d["whiten_bias_epochs"], d["lookahead_steps"], d["lookahead_decay"], d["lookahead_power"]) == \
        (3, 5, 0.95, 3.0)
    assert d["translate"] == 2 and d["bias_lr_scale"] == 64.0 and d["cutout"] == 0
    assert (d["lr_per_1024"], d["weight_decay_per_1024"], d["train_epochs"], d["epochs"]) == (11.5, 0.0153, 9.9, 10)


def test_parameter_count():
    model = create_model("airbench_net", num_classes=10)
    whiten = 3 * 24 * 2 * 2 + 24  # 2x2 conv 3 -> 24 with bias
    block1 = 24 * 64 * 9 + 64 * 64 * 9 + 2 * 2 * 64  # two 3x3 convs + two BNs (scale, shift)
    block2 = 64 * 256 * 9 + 256 * 256 * 9 + 2 * 2 * 256
    block3 = 256 * 256 * 9 * 2 + 2 * 2 * 256
    head = 256 * 10  # no bias
    assert whiten + block1 + block2 + block3 + head == AIRBENCH_NET_PARAMETERS
    assert count_parameters(model) == AIRBENCH_NET_PARAMETERS
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


def test_whitening_init_whitens_the_training_patches_and_freezes_the_layer(data):
    setup = build(data)
    model = setup.model
    x = setup.prepare(data.train_x)
    assert x.dtype == torch.float32 and x.is_contiguous(memory_format=torch.channels_last)
    raw_cov = torch.cov(patches(x).T)
    assert (raw_cov - torch.eye(12)).abs().max() > 0.5  # the test data is far from white to begin with
    assert not model.whiten.weight.requires_grad
    setup.init_from_data(x.clone(), data.train_y)  # a copy: the alternating flip mirrors the images it is handed
    assert not model.whiten.weight.requires_grad
    assert model.whiten.bias.requires_grad
    average = setup.eval_model()  # the lookahead average starts from the whitened net
    assert average is not model and torch.equal(average.whiten.weight, model.whiten.weight)
    with torch.no_grad():
        out = model.whiten(x).permute(0, 2, 3, 1).reshape(-1, 24)
    # airbench's whitening: the uncentred second moment of the outputs is the identity, the bias stays at 0
    second = out[:, :12].T.double() @ out[:, :12].double() / len(out)
    assert torch.allclose(second, torch.eye(12, dtype=torch.float64), atol=2e-2)
    assert torch.equal(model.whiten.bias, torch.zeros(24))
    assert torch.equal(model.whiten.weight[12:], -model.whiten.weight[:12])
    trainable = {id(p) for group in setup.optimizer.param_groups for p in group["params"]}
    assert id(model.whiten.weight) not in trainable and id(model.whiten.bias) in trainable


def test_one_training_step_is_finite_and_updates_the_trainable_weights(data):
    setup = build(data)
    model = setup.model
    x = setup.prepare(data.train_x)
    setup.init_from_data(x, data.train_y)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    xb = setup.augment(x[:32], torch.Generator().manual_seed(1))
    assert xb.shape == (32, 3, 32, 32) and not torch.equal(xb, x[:32])
    for group in setup.optimizer.param_groups:
        group["lr"] = group["lr"] * setup.lr_multiplier(0, 10)
    loss = setup.loss_fn(model(xb), data.train_y[:32])
    setup.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    setup.optimizer.step()
    assert math.isfinite(loss.item())
    for name, p in model.named_parameters():
        assert torch.isfinite(p).all(), name
        if p.requires_grad:
            assert not torch.equal(p, before[name]), f"{name} did not change"
        else:  # whitening filters and BN scales stay as they were
            assert torch.equal(p, before[name]), f"frozen {name} changed"
    assert model.blocks[0].conv1.weight.is_contiguous(memory_format=torch.channels_last)


def test_optimizer_groups_follow_airbench_conventions(data):
    recipe = get_recipe("cifar10")
    hp = recipe.hyperparameters({"batch_size": 512})
    setup = recipe.build(hp, data, CPU)
    shifts, others = setup.optimizer.param_groups
    kilostep = 1024 * (1 + 1 / (1 - 0.85))  # airbench94's main(): lr = 11.5 / kilostep_scale, on the summed loss
    lr = 11.5 / kilostep
    assert shifts["lr"] == pytest.approx(lr * 64) and others["lr"] == pytest.approx(lr)
    per_step_decay = 0.0153 * 512 / kilostep  # wd = weight_decay * batch_size / kilostep_scale
    for group in (shifts, others):  # the same decay per step in both groups
        assert group["lr"] * group["weight_decay"] == pytest.approx(per_step_decay)
        assert group["nesterov"] and group["momentum"] == hp["momentum"]
    assert len(shifts["params"]) == 6  # one BN shift per BN layer
    assert setup.lr_multiplier(0, 100) == pytest.approx(0.2)
    assert setup.lr_multiplier(23, 100) == pytest.approx(1.0)  # airbench: int(0.23 * total) warm-up steps
    assert setup.lr_multiplier(100, 100) == pytest.approx(0.07)
    # at airbench's own length: 476 steps, int(0.23 * 476) = 109 of them warm-up (get_lr, step by step)
    for step in (0, 50, 108, 109, 300, 475):
        want = 0.2 * (1 - step / 109) + step / 109 if step < 109 else (1 - (step - 109) / 367) + 0.07 * (step - 109) / 367
        assert setup.lr_multiplier(step, 476) == pytest.approx(want)
    assert setup.train_epochs == 9.9  # the runner stops after ceil(9.9 x 48) = 476 steps
    y = torch.arange(8) % 10
    logits = torch.randn(8, 10)
    assert setup.loss_fn(logits, y) == pytest.approx(float(F.cross_entropy(logits, y, label_smoothing=0.2,
                                                                            reduction="sum")))


def test_tta_predict_is_the_mean_of_the_image_and_mirror_logits(data):
    setup = build(data, tta_translate=False)
    model = setup.model.eval()
    x = setup.prepare(data.eval_x[:8])
    with torch.no_grad():
        expected = (model(x) + model(x.flip(-1))) / 2
        got = setup.predict(model, x)
        assert torch.equal(got, expected)
        assert not torch.allclose(got, model(x))


def test_translate_tta_is_airbench_level_2_with_the_documented_weights(data):
    setup = build(data)  # tta and tta_translate on: level 2
    model = setup.model.eval()
    x = setup.prepare(data.eval_x[:8])
    padded = F.pad(x, (1, 1, 1, 1), mode="reflect")
    top_left, bottom_right = padded[..., 0:32, 0:32], padded[..., 2:34, 2:34]
    # one-pixel shifts of the image (the new row and column reflect the image's second one)
    assert torch.equal(top_left[..., 1:, 1:], x[..., :-1, :-1]) and torch.equal(top_left[..., 0, 1:], x[..., 1, :-1])
    assert torch.equal(bottom_right[..., :-1, :-1], x[..., 1:, 1:])
    with torch.no_grad():
        m = model
        expected = (0.25 * (m(x) + m(x.flip(-1)))
                    + 0.125 * (m(top_left) + m(top_left.flip(-1)) + m(bottom_right) + m(bottom_right.flip(-1))))
        got = setup.predict(model, x)
        assert torch.allclose(got, expected, atol=1e-6, rtol=1e-5)
        assert not torch.allclose(got, (m(x) + m(x.flip(-1))) / 2, atol=1e-6)
        # tta_translate without tta: the shifted views, not mirrored
        alone = build(data, tta=False).predict(model, x)
        assert torch.allclose(alone, 0.5 * m(x) + 0.25 * m(top_left) + 0.25 * m(bottom_right), atol=1e-6, rtol=1e-5)
    assert build(data, tta=False, tta_translate=False).predict is None  # level 0: plain logits

    seen = []  # every view reaches the net in the input's (channels_last) layout
    setup.predict(lambda v: seen.append(v.is_contiguous(memory_format=torch.channels_last)) or v.sum((1, 2, 3)), x)
    assert seen == [True] * 6


def test_alternating_flip_mirrors_each_image_opposite_to_the_previous_epoch_deterministically():
    images = torch.randn(200, 3, 4, 5)
    flips = AlternatingFlip(seed=7)
    stored = images.clone()
    flips.start(stored)
    first = flips.mirrored(0)
    assert 60 < int(first.sum()) < 140  # a fair coin per image
    assert torch.equal(stored, torch.where(first.view(-1, 1, 1, 1), images.flip(-1), images))
    for epoch in range(1, 4):
        flips.next_epoch()
        now = flips.mirrored(epoch)
        assert torch.equal(now, ~flips.mirrored(epoch - 1))  # every image the other way round
        assert torch.equal(stored, torch.where(now.view(-1, 1, 1, 1), images.flip(-1), images))
    # the same seed gives the same first epoch, another seed another
    again = AlternatingFlip(seed=7)
    again.start(images.clone())
    other = AlternatingFlip(seed=8)
    other.start(images.clone())
    assert torch.equal(again.mirrored(0), first) and not torch.equal(other.mirrored(0), first)


def test_alternating_flip_reaches_the_runners_batches_and_follows_the_seed(data):
    """Through the real in-memory batch source: the images in each epoch's batches are mirrored exactly as
    mirrored(epoch) says, and the coins come from the seeded global generator (the runner seeds it before build)."""
    setup = build(data, translate=0, epochs=3)  # no shifts, so each batch image is its stored image or its mirror
    plan = BatchPlan(setup=setup, batch_size=16, epochs=3, seed=0, device=CPU, amp="off", ctx=DistContext())
    batches = InMemoryBatches(data, plan)
    batches.start()
    originals = setup.prepare(data.train_x)
    flips = setup.flips
    for epoch in range(3):
        seen = 0
        for xb, yb in batches.epoch(epoch):
            for image, label in zip(xb, yb):
                plain = (originals - image).abs().flatten(1).amax(1) == 0
                mirror = (originals.flip(-1) - image).abs().flatten(1).amax(1) == 0
                (i,) = torch.nonzero(plain | mirror).flatten().tolist()
                assert bool(mirror[i]) == bool(flips.mirrored(epoch)[i]) and label == data.train_y[i]
                seen += 1
        assert seen == len(data.train_x)
        setup.on_epoch_end(epoch + 1)
    assert flips.epoch == 2  # no flip after the last epoch

    torch.manual_seed(0)
    same = get_recipe("cifar10").build(get_recipe("cifar10").hyperparameters({"batch_size": 32}), data, CPU)
    torch.manual_seed(1)
    other = get_recipe("cifar10").build(get_recipe("cifar10").hyperparameters({"batch_size": 32}), data, CPU)
    assert build(data).flips.seed == same.flips.seed != other.flips.seed
    assert build(data, alternating_flip=False).flips is None


@pytest.fixture
def nothing_compiled(monkeypatch):
    """The freeze drops requires_grad only while torch.compile has compiled nothing in the process (another test
    may have compiled something)."""
    import daybreak.recipes.common as common

    monkeypatch.setattr(common, "_compiled_anything", lambda: False)


def test_whitening_bias_trains_for_n_epochs_then_stays_frozen(data, nothing_compiled):
    setup, x = started(data, whiten_bias_epochs=1)
    bias = setup.model.whiten.bias
    history = []

    def record(step, epoch):
        history.append((epoch, bias.requires_grad, bias.detach().clone(), setup.eval_model().whiten.bias.clone()))

    assert bias.requires_grad and any(bias is p for g in setup.optimizer.param_groups for p in g["params"])
    train(setup, x, data.train_y, epochs=3, batch=16, after_step=record)  # 4 steps per epoch
    first = [h for h in history if h[0] == 0]
    later = [h for h in history if h[0] > 0]
    assert all(requires for _, requires, _, _ in first) and not any(requires for _, requires, _, _ in later)
    assert not torch.equal(first[0][2], first[-1][2])  # trained during epoch 1
    frozen = first[-1][2]
    for _, _, value, averaged in later:  # unchanged by every later step and lookahead update, and so evaluated
        assert torch.equal(value, frozen) and torch.equal(averaged, frozen)
    assert bias.grad is None

    on = build(data, whiten_bias_freeze=False)  # switched off: the bias keeps training
    assert on.whiten_bias_freeze is None
    zero = build(data, whiten_bias_epochs=0)  # 0 epochs: never trained, not even in the optimizer
    assert not zero.model.whiten.bias.requires_grad
    assert all(zero.model.whiten.bias is not p for g in zero.optimizer.param_groups for p in g["params"])


def test_whitening_bias_freeze_after_torch_compile_keeps_the_gradient_and_the_value(data, monkeypatch):
    """Once torch.compile has compiled something, dropping requires_grad would recompile the training step inside
    the clock: the bias keeps its gradient and is put back after every step instead."""
    import daybreak.recipes.common as common

    monkeypatch.setattr(common, "_compiled_anything", lambda: True)
    setup, x = started(data, whiten_bias_epochs=1)
    bias = setup.model.whiten.bias
    values = []
    train(setup, x, data.train_y, epochs=2, batch=16,
          after_step=lambda step, epoch: values.append((epoch, bias.detach().clone())))
    assert bias.requires_grad and setup.whiten_bias_freeze.restore
    frozen = [v for epoch, v in values if epoch == 0][-1]
    assert all(torch.equal(v, frozen) for epoch, v in values if epoch > 0)
    assert torch.equal(setup.eval_model().whiten.bias, frozen)


def test_whitening_bias_freeze_under_ddp_keeps_the_gradient_and_the_value(data, tmp_path):
    """Under DDP a parameter cannot stop requiring a gradient once wrapped (the reducer fails the next step), so
    the frozen bias keeps its gradient and is put back after each step. A 1-process gloo group exercises it."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        setup, x = started(data, whiten_bias_epochs=1)
        ddp = torch.nn.parallel.DistributedDataParallel(setup.model)
        bias = setup.model.whiten.bias
        values = []
        train(setup, x, data.train_y, epochs=3, batch=16, model=ddp,
              after_step=lambda step, epoch: values.append((epoch, bias.detach().clone())))
        assert bias.requires_grad and setup.whiten_bias_freeze.restore
        frozen = [v for epoch, v in values if epoch == 0][-1]
        assert all(torch.equal(v, frozen) for epoch, v in values if epoch > 0)
        assert torch.equal(setup.eval_model().whiten.bias, frozen)  # eval_model broadcasts the average's buffers
    finally:
        dist.destroy_process_group()


def test_lookahead_average_is_evaluated_and_follows_airbench_update(data):
    setup, x = started(data)
    model, la = setup.model, setup.lookahead
    assert setup.eval_model() is la.average and setup.evaluated_model() is la.average
    checks = {}

    def before_hooks(step):  # the live weights and the average just before on_step
        checks[step] = ([p.detach().clone() for p in model.parameters()],
                        [p.detach().clone() for p in la.average.parameters()])

    def after_step(step, epoch):
        live = [p.detach() for p in model.parameters()]
        avg = [p.detach() for p in setup.eval_model().parameters()]
        before_live, before_avg = checks[step]
        if step == 5:  # an update: avg <- d * avg + (1 - d) * w, then w <- avg
            d = 0.95**5 * (5 / 12) ** 3
            for p, a, w0, a0 in zip(model.parameters(), avg, before_live, before_avg):
                want = d * a0 + (1 - d) * w0 if p.requires_grad else w0
                assert torch.allclose(a, want, atol=1e-6)
            assert all(torch.equal(w, a) for w, a in zip(live, avg))
            assert all(torch.equal(a, b) for a, b in zip(la.average.buffers(), model.buffers()))
        elif step == 6:  # between updates the raw weights move on, the average does not
            assert any(not torch.equal(w, a) for w, a in zip(live, avg))
            assert all(torch.equal(a, a0) for a, a0 in zip(avg, before_avg))
        elif step == 12:  # the last step: the weights return to the average
            assert all(torch.equal(w, a) for w, a in zip(live, avg))

    assert train(setup, x, data.train_y, epochs=3, batch=16, before_hooks=before_hooks, after_step=after_step) == 12
    assert la.updates == 2  # steps 5 and 10; at the last the weights return to the average (steps 11-12 dropped)
    assert not la.average.training and not any(p.requires_grad for p in la.average.parameters())

    off = build(data, lookahead=False)
    assert off.eval_model is None and off.evaluated_model() is off.model and off.lookahead is None


@pytest.mark.parametrize("switch", SWITCHES)
def test_every_switch_off_builds_and_trains(data, switch):
    setup, x = started(data, **{switch: False})
    assert train(setup, x, data.train_y, epochs=2, batch=32) == 4
    model = setup.evaluated_model().eval()
    with torch.no_grad():
        xe = setup.prepare(data.eval_x[:4])
        logits = setup.predict(model, xe) if setup.predict is not None else model(xe)
    assert logits.shape == (4, 10) and torch.isfinite(logits).all()


def test_each_switch_changes_behaviour(data):
    on = build(data)
    assert on.augment is not None and on.predict is not None and on.init_from_data is not None
    assert on.on_step is not None and on.on_epoch_end is not None and on.eval_model is not None

    assert build(data, augment=False).augment is None
    assert build(data, augment=False).flips is None  # no flips at all
    assert build(data, augment=False).notes  # says alternating_flip has no effect
    assert build(data, tta=False, tta_translate=False).predict is None
    assert build(data, lookahead=False).eval_model is None
    assert build(data, whiten_bias_freeze=False).whiten_bias_freeze is None

    # alternating flip off: each batch flips a fresh coin per image (the stored images are left alone)
    random_flips, x = started(data, alternating_flip=False, translate=0)
    assert torch.equal(x, random_flips.prepare(data.train_x))
    xb = random_flips.augment(x, torch.Generator().manual_seed(0))
    mirrored = (xb - x.flip(-1)).flatten(1).abs().amax(1) == 0
    assert 0 < int(mirrored.sum()) < len(x)

    logits = torch.randn(16, 10, generator=torch.Generator().manual_seed(0))
    y = torch.arange(16) % 10
    hard = build(data, label_smoothing_on=False).loss_fn(logits, y)
    assert torch.allclose(hard, F.cross_entropy(logits, y, reduction="sum"))
    assert not torch.allclose(hard, on.loss_fn(logits, y))

    plain = build(data, whitening=False)
    assert plain.model.whiten.weight.requires_grad
    trainable = {id(p) for group in plain.optimizer.param_groups for p in group["params"]}
    assert id(plain.model.whiten.weight) in trainable
    weight = plain.model.whiten.weight.detach().clone()
    plain.init_from_data(plain.prepare(data.train_x), data.train_y)  # lookahead and flips only, no whitening
    assert torch.equal(plain.model.whiten.weight, weight)

    nchw = build(data, channels_last=False)
    x = nchw.prepare(data.train_x[:4])
    assert x.is_contiguous() and not x.is_contiguous(memory_format=torch.channels_last)
    assert nchw.model.blocks[0].conv1.weight.is_contiguous()
    assert torch.allclose(x, on.prepare(data.train_x[:4]))  # same values, different layout


def tiny_run(data: TaskData, out, full_schedule: bool = False, **overrides) -> RunResult:
    task = TASKS.get("cifar10")
    with TASKS.override("cifar10", dataclasses.replace(task, load=lambda d, a, dl: data)):
        return run(RunConfig(task="cifar10", overrides={"epochs": 2, "batch_size": 8, **overrides}, target=0.05,
                             out=out, quiet=True, device="cpu", full_schedule=full_schedule))


def test_end_to_end_run_with_the_hooks_on_is_deterministic(tmp_path, data):
    """Two full runs (8 steps per epoch: lookahead updates; after epoch 1 the images flip and the whitening bias
    freezes) through the runner, with the same seed: the same history."""
    results = [tiny_run(data, tmp_path / f"run{i}", full_schedule=True, whiten_bias_epochs=1) for i in range(2)]
    saved = json.loads((tmp_path / "run0" / RESULT_FILE).read_text())
    assert saved["recipe"] == "cifar10" and saved["hyperparameters"]["lookahead"] is True
    assert all(r.reached for r in results)
    a, b = ([(h.accuracy, h.train_loss) for h in r.history] for r in results)
    assert len(a) == 2 and a == b
    assert all(0.0 <= accuracy <= 1.0 for accuracy, _ in a)


def test_end_to_end_on_a_synthetic_cifar_tarball_reaches_its_target(tmp_path):
    from daybreak.data.synthetic import write_cifar10

    write_cifar10(tmp_path / "cifar", 40, 100, as_tarball=True, seed=0)  # 200 training images of 10 patterns
    out = tmp_path / "run"
    # every switch on; seeds 0-2 gave 0.91-0.98 after 2 epochs, 0.99-1.0 after 3
    result = run(RunConfig(task="cifar10", data_dir=tmp_path / "cifar", allow_custom_data=True, target=0.7,
                           overrides={"epochs": 3, "batch_size": 25}, out=out, quiet=True, device="cpu"))
    assert result.reached, [h.accuracy for h in result.history]
    assert RunResult.load(out).reached


# --- airbench's fp16 network, its loss under DDP, cutout, the centred whitening option ---------------------------

def test_airbench_fp16_network_keeps_batchnorm_in_float32_and_steps(data):
    from daybreak.models.resnet_cifar import half_with_float_norms
    from daybreak.recipes.cifar10 import image_prep, summed_loss

    model = half_with_float_norms(create_model("airbench_net", num_classes=10))
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert all(p.dtype == torch.float32 for m in norms for p in list(m.parameters()) + list(m.buffers())
               if p.is_floating_point())
    others = [p for name, p in model.named_parameters() if "norm" not in name]
    assert others and all(p.dtype == torch.float16 for p in others)
    hp = get_recipe("cifar10").hyperparameters()
    x = image_prep(CPU, hp, half=True)(data.train_x[:8])
    assert x.dtype == torch.float16 and x.is_contiguous(memory_format=torch.channels_last)
    model.init_whitening(x)
    loss = summed_loss(0.2)(model(x), data.train_y[:8])  # fp16 logits, the loss summed in float32
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())
    # on a CPU the recipe keeps float32 and says so; the runner only drops autocast for a native fp16 network
    setup = build(data)
    assert setup.native_precision is None and any("is for CUDA" in n for n in setup.notes)
    assert build(data, fp16=False).notes == [n for n in setup.notes if "is for CUDA" not in n]


def test_the_summed_loss_covers_the_global_batch_under_ddp(monkeypatch):
    import daybreak.recipes.cifar10 as cifar10

    logits, y = torch.randn(6, 10), torch.arange(6) % 10
    one = cifar10.summed_loss(0.2)(logits, y)
    monkeypatch.setattr(cifar10, "world_size", lambda: 4)  # DDP averages 4 ranks' gradients: each sum x 4
    assert cifar10.summed_loss(0.2)(logits, y) == pytest.approx(4 * float(one))


GAP_AT_THE_SMOOTHING_OPTIMUM = math.log(0.82 / 0.02)  # 3.71: softmax 0.82 on the label, 0.02 on each other class


def logits_at_gap(batch: int, gap: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.arange(batch) % 10
    logits = torch.zeros(batch, 10)
    logits[torch.arange(batch), y] = gap
    return logits.to(dtype), y


def test_the_float32_loss_is_finite_where_an_fp16_sum_overflows():
    # cifar10_muon on an H200: fp16 logits [2000, 10] near the label-smoothing optimum; F.cross_entropy sums the
    # smoothing term in fp16 (35.4 per example: 70,800 > 65,504) and the loss value is inf, its gradient finite
    from daybreak.recipes.common import cross_entropy_float32

    half, y = logits_at_gap(2000, GAP_AT_THE_SMOOTHING_OPTIMUM, torch.float16)
    assert math.isinf(F.cross_entropy(half, y, label_smoothing=0.2, reduction="sum").item())  # the old loss
    reference = F.cross_entropy(half.float(), y, label_smoothing=0.2, reduction="sum")
    exact = F.cross_entropy(logits_at_gap(2000, GAP_AT_THE_SMOOTHING_OPTIMUM, torch.float32)[0], y,
                            label_smoothing=0.2, reduction="sum")
    half.requires_grad_(True)
    loss = cross_entropy_float32(half, y, label_smoothing=0.2, reduction="sum")
    assert loss.dtype == torch.float32 and math.isfinite(loss.item())
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)  # float32's, from the same fp16 logits
    assert loss.item() == pytest.approx(exact.item(), rel=1e-3) and loss.item() == pytest.approx(1733.8, abs=0.5)
    loss.backward()
    assert half.grad is not None and half.grad.dtype == torch.float16 and torch.isfinite(half.grad).all()
    old = half.detach().clone().requires_grad_(True)
    F.cross_entropy(old, y, label_smoothing=0.2, reduction="sum").backward()
    assert torch.allclose(half.grad.float(), old.grad.float(), atol=1e-3)  # the gradient airbench steps with


@pytest.mark.parametrize("name", ["cifar10", "cifar10_muon", "cifar10_96"])
def test_each_fp16_recipes_loss_at_batch_2000_is_finite(data, name):
    recipe = get_recipe(name)
    torch.manual_seed(0)
    setup = recipe.build(recipe.hyperparameters({"batch_size": 2000}), data, CPU)
    half, y = logits_at_gap(2000, GAP_AT_THE_SMOOTHING_OPTIMUM, torch.float16)  # what its fp16 network hands out
    loss = setup.loss_fn(half, y)
    reference = F.cross_entropy(half.float(), y, label_smoothing=recipe.defaults["label_smoothing"], reduction="sum")
    assert math.isfinite(loss.item()) and loss.item() == pytest.approx(reference.item(), rel=1e-6)


def test_cutout_zeroes_one_square_per_image():
    from daybreak.recipes.cifar10 import random_cutout

    x = torch.ones(50, 3, 32, 32)
    out = random_cutout(x, 12, torch.Generator().manual_seed(0))
    zeros = (out == 0).all(1)  # all channels of a pixel together
    assert torch.equal((out == 0).sum((1, 2, 3)), torch.full((50,), 3 * 144))
    rows, cols = zeros.any(2), zeros.any(1)
    assert torch.equal(rows.sum(1), torch.full((50,), 12)) and torch.equal(cols.sum(1), torch.full((50,), 12))
    assert len({tuple(r.nonzero().flatten()[:1].tolist()) for r in rows}) > 5  # positions vary per image
    assert torch.equal(random_cutout(x, 0, torch.Generator()), x)


def test_centred_whitening_is_the_option_with_mean_zero_outputs(data):
    model = create_model("airbench_net", num_classes=10)
    x = get_recipe("cifar10").build(get_recipe("cifar10").hyperparameters(), data, CPU).prepare(data.train_x)
    model.init_whitening(x, centred=True)
    with torch.no_grad():
        out = model.whiten(x).permute(0, 2, 3, 1).reshape(-1, 24)
    assert torch.allclose(torch.cov(out[:, :12].T), torch.eye(12), atol=2e-2)
    assert out[:, :12].mean(0).abs().max() < 1e-3


def test_the_whitening_covariance_is_computed_without_tf32_whatever_the_run_allows(data, monkeypatch):
    # a GPU run allows TF32 for its matmuls (its record's tf32); airbench's covariance is plain float32
    import daybreak.models.resnet_cifar as rc

    seen = []
    real_matmul = torch.matmul

    def watching(a, b):
        seen.append(torch.backends.cuda.matmul.allow_tf32)
        return real_matmul(a, b)

    model = create_model("airbench_net", num_classes=10)
    x = get_recipe("cifar10").build(get_recipe("cifar10").hyperparameters(), data, CPU).prepare(data.train_x)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # as a GPU run sets it
    try:
        monkeypatch.setattr(torch, "matmul", watching)
        model.init_whitening(x)
        monkeypatch.undo()
        assert torch.backends.cuda.matmul.allow_tf32  # put back
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    assert seen == [False]  # the covariance's product ran with TF32 off
    patches = torch.randn(1000, 12)
    exact = patches.double().T @ patches.double()
    assert rc.second_moment(patches).dtype == torch.float64
    assert torch.allclose(rc.second_moment(patches), exact, rtol=1e-5, atol=1e-3)


# --- Muon and cifar10_muon ---------------------------------------------------------------------------------------

def test_newton_schulz_orthogonalizes_the_update():
    from daybreak.recipes.muon import orthogonalize

    gen = torch.Generator().manual_seed(0)
    u, _ = torch.linalg.qr(torch.randn(64, 64, generator=gen))
    v, _ = torch.linalg.qr(torch.randn(216, 64, generator=gen))
    g = u @ torch.diag(torch.linspace(1, 30, 64)) @ v.T  # singular values 1..30: condition number 30
    s = torch.linalg.svdvals(orthogonalize(g, steps=3).double())
    assert 0.25 < float(s.min()) and float(s.max()) < 1.5  # every singular value pulled towards ~1 (U V^T)
    assert float(s.max() / s.min()) < 30 / 5
    core = u.T @ orthogonalize(g, steps=3) @ v  # g's own singular vectors: diagonal, nothing rotated
    assert (core - torch.diag(torch.diagonal(core))).abs().max() < 1e-4
    tall = orthogonalize(g.T, steps=3)  # tall matrices are handled transposed
    assert tall.shape == (216, 64) and torch.allclose(tall, orthogonalize(g, steps=3).T)


def test_muon_matches_airbench_and_its_sgd_groups_match_torch_sgd():
    from daybreak.recipes.muon import Muon, orthogonalize

    g = torch.Generator().manual_seed(0)
    w = torch.nn.Parameter(torch.randn(8, 3, 3, 3, generator=g))
    b = torch.nn.Parameter(torch.randn(8, generator=g))
    b_ref = torch.nn.Parameter(b.detach().clone())
    opt = Muon([dict(params=[w], lr=0.24, momentum=0.6, muon=True),
                dict(params=[b], lr=0.05, momentum=0.85, weight_decay=0.08, muon=False)], newton_schulz_steps=3)
    ref = torch.optim.SGD([b_ref], lr=0.05, momentum=0.85, nesterov=True, weight_decay=0.08)
    manual, buf = w.detach().clone(), torch.zeros_like(w)
    for step in range(3):
        grad_w, grad_b = torch.randn(w.shape, generator=g), torch.randn(b.shape, generator=g)
        w.grad, b.grad, b_ref.grad = grad_w.clone(), grad_b.clone(), grad_b.clone()
        opt.step()
        ref.step()
        buf = 0.6 * buf + grad_w  # airbench94_muon's Muon.step, written out
        update = grad_w + 0.6 * buf
        manual = manual * (8 ** 0.5) / manual.norm()
        manual = manual - 0.24 * orthogonalize(update.reshape(8, -1), 3).view(manual.shape)
        assert torch.allclose(w, manual, atol=1e-6) and torch.allclose(b, b_ref, atol=1e-7)


def build_muon(data: TaskData, **overrides):
    recipe = get_recipe("cifar10_muon")
    torch.manual_seed(0)
    return recipe.build(recipe.hyperparameters({"batch_size": 32, **overrides}), data, CPU)


def test_cifar10_muon_groups_and_schedules_follow_airbench94_muon(data):
    recipe = get_recipe("cifar10_muon")
    d = recipe.defaults
    assert (d["batch_size"], d["epochs"], d["muon_lr"], d["muon_momentum"], d["bias_lr"], d["head_lr"]) == \
        (2000, 8, 0.24, 0.6, 0.053, 0.67)
    assert recipe.builds_from_spec and {"muon", "normalize_weights", "head_unit_std"} <= set(recipe.switches)
    setup = build_muon(data)
    model = setup.model
    whiten, shifts, head, filters = setup.optimizer.param_groups
    wd = 2e-6 * 32
    assert whiten["params"] == [model.whiten.bias] and whiten["lr"] * whiten["weight_decay"] == pytest.approx(wd)
    assert len(shifts["params"]) == 6 and shifts["lr"] == 0.053 and head["params"] == [model.head.weight]
    assert filters["muon"] and filters["momentum"] == 0.6 and len(filters["params"]) == 6
    assert all(p.dim() == 4 for p in filters["params"]) and all(p is not model.whiten.weight for p in filters["params"])
    assert model.logit_scale == 1 / 256
    assert float(model.head.weight.detach().std()) == pytest.approx(1.0, rel=1e-5)
    # 25 steps per epoch at airbench's size: the whitening bias's lr reaches 0 after 3 epochs, the rest after 8
    assert setup.lr_multiplier(0, 200) == [1.0, 1.0, 1.0, 1.0]
    assert setup.lr_multiplier(50, 200) == pytest.approx([1 - 50 / 75] + [0.75] * 3)
    assert setup.lr_multiplier(100, 200) == pytest.approx([0.0] + [0.5] * 3)
    sgd_only = build_muon(data, muon=False)  # the lesion: filters on airbench94's Nesterov SGD
    assert not any(g["muon"] for g in sgd_only.optimizer.param_groups)
    assert build_muon(data, head_unit_std=False).model.head.weight.detach().std() < 0.2


# --- cifar10_96 ------------------------------------------------------------------------------------------------

def test_cifar10_96_is_airbench96s_residual_net_and_schedule(data):
    recipe = get_recipe("cifar10_96")
    d = recipe.defaults
    assert (d["epochs"], d["lr_per_1024"], d["weight_decay_per_1024"], d["warmup"], d["lr_end"]) == \
        (37, 9.0, 0.012, 0.1, 0.0)
    assert (d["translate"], d["cutout"], recipe.model) == (4, 12, "airbench_net96")
    model = create_model("airbench_net96").eval()
    block = model.blocks[0]
    assert block.depth == 3 and block.norm1.momentum == 0.1 and [b.conv1.out_channels for b in model.blocks] == \
        [128, 384, 512]
    x = torch.randn(2, 24, 16, 16)
    with torch.no_grad():
        x0 = block.act(block.norm1(block.pool(block.conv1(x))))
        want = block.act(block.norm3(block.conv3(block.act(block.norm2(block.conv2(x0))))) + x0)
        assert torch.allclose(block(x), want)
    setup = recipe.build(recipe.hyperparameters({"batch_size": 16}), data, CPU)
    assert setup.lr_multiplier(1775, 1776) == pytest.approx(1 / (1776 - 177))  # linear to 0 at the end
    assert setup.train_epochs == 37.0


@pytest.mark.parametrize("name", ["cifar10", "cifar10_muon", "cifar10_96"])
def test_each_cifar_recipe_trains_on_synthetic_cifar_files(tmp_path, name):
    from daybreak.data.synthetic import write_cifar10

    write_cifar10(tmp_path / "cifar", 10, 20, as_tarball=True, seed=0)  # 50 training images
    r = run(RunConfig(task="cifar10", recipe=name, data_dir=tmp_path / "cifar", allow_custom_data=True,
                      overrides={"epochs": 1, "batch_size": 10}, full_schedule=True, out=tmp_path / "r",
                      quiet=True, device="cpu"))
    assert r.status in ("reached", "not_reached") and r.steps_per_epoch == 5 and len(r.history) == 1
    assert math.isfinite(r.history[0].train_loss) and r.performance.init_before_data
    assert [p.phase for p in r.phases[:3]] == ["model_init", "warmup", "data_load"]
