"""mnist: MNIST handwritten digits from the four official IDX files (downloaded and SHA-256-checked)."""

from __future__ import annotations

from daybreak.metrics import TOP1
from daybreak.tasks import TASKS, InputSpec, LeaderboardFacts, Task, reader

TASKS.add("mnist", Task(
    name="mnist",
    description="MNIST handwritten digits, the four IDX files",
    metric=TOP1, target=0.99, eval_split="t10k test files (10,000 images)", num_classes=10,
    load=reader("daybreak.data.mnist", "load_mnist"), reference_recipe="mnist",
    files="train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (.gz or not)",
    input_spec=InputSpec(shape=(1, 28, 28), dtype="uint8"),
    leaderboard=LeaderboardFacts(title="MNIST", eval_split="the 10,000 test images"),
))
