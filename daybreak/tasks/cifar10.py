"""cifar10: CIFAR-10 from the python distribution, DAWNBench's 94% top-1 task."""

from __future__ import annotations

from daybreak.metrics import TOP1
from daybreak.tasks import TASKS, InputSpec, LeaderboardFacts, Task, lazy, reader

TASKS.add("cifar10", Task(
    name="cifar10",
    description="CIFAR-10, the python distribution",
    metric=TOP1, target=0.94, eval_split="test_batch (10,000 images)", num_classes=10,
    load=reader("daybreak.data.cifar10", "load_cifar10"), reference_recipe="cifar10",
    folder_of_source=lazy("daybreak.data.cifar10", "folder_of_source"),  # the tarball's or batches folder's parent
    files="cifar-10-python.tar.gz or the extracted cifar-10-batches-py/",
    input_spec=InputSpec(shape=(3, 32, 32), dtype="uint8"),
    leaderboard=LeaderboardFacts(title="CIFAR-10", dawnbench=True, dawnbench_folder="CIFAR10",
                                 eval_split="the 10,000 test images"),
))
