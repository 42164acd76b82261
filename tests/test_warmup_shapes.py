"""Where the warm-up runs (compile, CUDA), it sees every shape the clock will: a run that paid its first-call costs
before the clock meets no new input shape inside it. Checked on the CPU by running the GPU's warm-up logic there
(``warmup_pays`` forced on) and recording, for every module call and every ``torch.linalg.eigh``, the shapes,
dtypes and memory layouts of its tensor inputs, split at the end of the warm-up. Eval sets whose size is not a
multiple of the evaluation chunk are the case that used to fail (a short last chunk autotuned inside the clock)."""

from __future__ import annotations

import pytest
import torch

from daybreak.data.synthetic import write_cifar10, write_mnist
from daybreak.tasks import evaluate as evaluate_module
from daybreak.tasks.evaluate import correct_counts, padded_to_chunks
from daybreak.train import runner, warmup

CHUNK = 128  # a smaller evaluation chunk keeps the CPU runs short; the logic is the same as at 1024


def layout(t: torch.Tensor) -> str:
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
        return "channels_last"
    return "contiguous" if t.is_contiguous() else f"strided{tuple(t.stride())}"


def signature(args) -> tuple:
    return tuple((tuple(a.shape), str(a.dtype), layout(a)) for a in args if isinstance(a, torch.Tensor))


@pytest.fixture
def shapes(monkeypatch):
    """{'warmup': set, 'clock': set} of (what, input signature) seen in each stage of the next run."""
    seen: dict[str, set] = {"init": set(), "warmup": set(), "clock": set()}
    stage = ["init"]
    monkeypatch.setattr(warmup, "warmup_pays", lambda compiled, device: True)
    monkeypatch.setattr(evaluate_module, "EVAL_CHUNK", CHUNK)
    original_warm_up = runner.warm_up

    def staged_warm_up(*args, **kwargs):
        stage[0] = "warmup"
        try:
            return original_warm_up(*args, **kwargs)
        finally:
            stage[0] = "clock"

    monkeypatch.setattr(runner, "warm_up", staged_warm_up)
    original_eigh = torch.linalg.eigh

    def eigh(a, *args, **kwargs):
        seen[stage[0]].add(("linalg.eigh", signature([a])))
        return original_eigh(a, *args, **kwargs)

    monkeypatch.setattr(torch.linalg, "eigh", eigh)

    def hook(module, args):
        seen[stage[0]].add((type(module).__name__, signature(args)))

    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
    yield seen
    handle.remove()


CASES = {
    # task, recipe, data writer (train, test sizes; the test sizes are not multiples of CHUNK), overrides
    "digits": ("digits", "digits", None, {"epochs": 1}),
    "mnist": ("mnist", "mnist", lambda d: write_mnist(d, 300, 300), {"epochs": 1, "batch_size": 64}),
    "cifar10": ("cifar10", "cifar10", lambda d: write_cifar10(d, 60, 300), {"epochs": 1, "batch_size": 100}),
    "cifar10_muon": ("cifar10", "cifar10_muon", lambda d: write_cifar10(d, 60, 300),
                     {"epochs": 1, "batch_size": 100}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_no_shape_inside_the_clock_that_the_warm_up_did_not_see(tmp_path, shapes, case):
    task, recipe, write, overrides = CASES[case]
    data = {}
    if write is not None:
        write(tmp_path / "data")
        data = dict(data_dir=str(tmp_path / "data"), allow_custom_data=True, download=False)
    r = runner.run(runner.RunConfig(task=task, recipe=recipe, out=tmp_path / "run", quiet=True, full_schedule=True,
                                    device="cpu", overrides=overrides, **data))
    assert r.status in ("reached", "not_reached") and len(r.history) >= 1
    assert r.performance.warmup.startswith("before the data")
    eval_examples = 450 if task == "digits" else 300  # digits: its fixed 25% split
    assert eval_examples % CHUNK != 0  # a short last chunk, padded
    assert shapes["clock"], "nothing ran inside the clock"
    new = shapes["clock"] - shapes["warmup"]
    assert new == set(), f"shapes first seen inside the clock: {sorted(new)}"
    if case.startswith("cifar10"):  # the whitening's solver was warmed up too
        assert any(what == "linalg.eigh" for what, _ in shapes["warmup"])
        assert any(what == "linalg.eigh" for what, _ in shapes["clock"])


def test_padding_changes_no_count():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 5))
    x, y = torch.randn(301, 3, 2, 2), torch.randint(0, 5, (301,))
    plain = correct_counts(model, x, y, device=torch.device("cpu"), batch_size=64, top5=True)
    padded_x = padded_to_chunks(x, 64)
    assert len(padded_x) == 320 and torch.equal(padded_x[:301], x) and not padded_x[301:].any()
    padded = correct_counts(model, padded_x, y, device=torch.device("cpu"), batch_size=64, top5=True, examples=301)
    assert plain.tolist() == padded.tolist() and plain.tolist()[2] == 301
    assert len(padded_to_chunks(torch.zeros(128, 1), 64)) == 128 and len(padded_to_chunks(torch.zeros(0, 1), 64)) == 64


def test_eager_on_a_cpu_warms_nothing_up(tmp_path):
    r = runner.run(runner.RunConfig(task="digits", out=tmp_path / "run", quiet=True, device="cpu",
                                    full_schedule=True, overrides={"epochs": 1}))
    assert r.performance.warmup.startswith("none (eager on a CPU")
    assert sum(p.end_s - p.start_s for p in r.phases if p.phase == "warmup") < 0.01  # an empty phase, no work
