"""The cifar10 recipe and its airbench-style network, on CPU with tiny synthetic uint8 images (no CIFAR files)."""

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
from daybreak.records.run import RESULT_FILE
from daybreak.tasks import TASKS
from daybreak.train.runner import RunConfig, run

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


def patches(x: torch.Tensor) -> torch.Tensor:
    """All 2x2x3 patches, flattened in the conv weight's (C, kh, kw) order."""
    return x.unfold(2, 2, 1).unfold(3, 2, 1).permute(0, 2, 3, 1, 4, 5).reshape(-1, 12)


def test_recipe_registered_and_switches_are_boolean_hyperparameters():
    recipe = get_recipe("cifar10")
    assert recipe.task == "cifar10" and recipe.model == "airbench_net" and recipe.batch_scaling == "global"
    assert "\n" not in recipe.summary
    assert recipe.defaults["batch_size"] == 1024 and recipe.defaults["label_smoothing"] == 0.2
    assert set(recipe.switches) == {"augment", "tta", "label_smoothing_on", "whitening", "channels_last"}
    for name in recipe.switches:
        assert recipe.defaults[name] is True


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
    setup.init_from_data(x, data.train_y)
    assert not model.whiten.weight.requires_grad
    assert model.whiten.bias.requires_grad
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
    assert setup.lr_multiplier(20, 100) == pytest.approx(1.0)
    assert setup.lr_multiplier(100, 100) == pytest.approx(0.07)


def test_tta_predict_is_the_mean_of_the_image_and_mirror_logits(data):
    setup = build(data)
    model = setup.model.eval()
    x = setup.prepare(data.eval_x[:8])
    with torch.no_grad():
        expected = (model(x) + model(x.flip(-1))) / 2
        got = setup.predict(model, x)
        assert torch.equal(got, expected)
        assert not torch.allclose(got, model(x))


def test_each_switch_changes_behaviour(data):
    on = build(data)
    assert on.augment is not None and on.predict is not None and on.init_from_data is not None

    assert build(data, augment=False).augment is None
    assert build(data, tta=False).predict is None

    logits = torch.randn(16, 10, generator=torch.Generator().manual_seed(0))
    y = torch.arange(16) % 10
    hard = build(data, label_smoothing_on=False).loss_fn(logits, y)
    assert torch.allclose(hard, F.cross_entropy(logits, y))
    assert not torch.allclose(hard, on.loss_fn(logits, y))

    plain = build(data, whitening=False)
    assert plain.init_from_data is None and plain.model.whiten.weight.requires_grad
    trainable = {id(p) for group in plain.optimizer.param_groups for p in group["params"]}
    assert id(plain.model.whiten.weight) in trainable

    nchw = build(data, channels_last=False)
    x = nchw.prepare(data.train_x[:4])
    assert x.is_contiguous() and not x.is_contiguous(memory_format=torch.channels_last)
    assert nchw.model.blocks[0].conv1.weight.is_contiguous()
    assert torch.allclose(x, on.prepare(data.train_x[:4]))  # same values, different layout


def test_end_to_end_run_with_tiny_data(tmp_path, monkeypatch, data):
    task = TASKS.get("cifar10")
    out = tmp_path / "run"
    with TASKS.override("cifar10", dataclasses.replace(task, load=lambda d, a, dl: data)):
        result = run(RunConfig(task="cifar10", overrides={"epochs": 1, "batch_size": 32}, target=0.05, out=out,
                               quiet=True, device="cpu"))
    assert (out / RESULT_FILE).exists()
    saved = json.loads((out / RESULT_FILE).read_text())
    assert saved["recipe"] == "cifar10"
    assert len(result.history) == 1
    assert 0.0 <= result.history[0].accuracy <= 1.0
