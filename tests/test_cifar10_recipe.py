"""The cifar10 recipe (airbench94's method) and its network, on CPU with tiny synthetic uint8 images (no CIFAR
files): the network, whitening, optimizer groups, each airbench piece behind its switch (lookahead, whitening bias
freeze, alternating flip, flip/translate TTA), and tiny end-to-end runs through the runner with the hooks on."""

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
                                    "whiten_bias_freeze", "label_smoothing_on", "whitening", "channels_last"}
    for name in recipe.switches:
        assert recipe.defaults[name] is True
    # airbench94's values (legacy/airbench94.py in KellerJordan/airbench)
    d = recipe.defaults
    assert (d["warmup"], d["lr_start"], d["lr_end"], d["momentum"]) == (0.23, 0.2, 0.07, 0.85)
    assert (d["whiten_bias_epochs"], d["lookahead_steps"], d["lookahead_decay"], d["lookahead_power"]) == \
        (3, 5, 0.95, 3.0)
    assert d["translate"] == 2 and d["bias_lr_scale"] == 64.0
    assert d["lr"] == pytest.approx(11.5 * 1024 / (1024 * (1 + 1 / (1 - 0.85))), rel=0.01)
    assert d["weight_decay"] == pytest.approx(0.0153 * 1024 / (1024 * (1 + 1 / (1 - 0.85))), rel=0.01)


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
    cov = torch.cov(out.T)
    assert torch.allclose(cov[:12, :12], torch.eye(12), atol=2e-2)
    assert out[:, :12].mean(0).abs().max() < 1e-3
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
    lr = hp["lr"] * 512 / 1024
    assert shifts["lr"] == pytest.approx(lr * hp["bias_lr_scale"]) and others["lr"] == pytest.approx(lr)
    per_step_decay = hp["weight_decay"] * 512 / 1024
    for group in (shifts, others):  # the same decay per step in both groups
        assert group["lr"] * group["weight_decay"] == pytest.approx(per_step_decay)
        assert group["nesterov"] and group["momentum"] == hp["momentum"]
    assert len(shifts["params"]) == 6  # one BN shift per BN layer
    assert setup.lr_multiplier(0, 100) == pytest.approx(0.2)
    assert setup.lr_multiplier(23, 100) == pytest.approx(1.0)  # airbench: int(0.23 * total) warm-up steps
    assert setup.lr_multiplier(100, 100) == pytest.approx(0.07)


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
    assert la.updates == 2 + 1  # steps 5, 10 and the last one
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
    assert torch.allclose(hard, F.cross_entropy(logits, y))
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
