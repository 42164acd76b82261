"""imagenet: ILSVRC2012 from its JPEG folders, DAWNBench's 93% top-5 task.

The reader (daybreak.data.imagenet) scans the folders and holds the decode pipeline; daybreak.tasks.imagenet_batches
hooks it to the runner (a sharded training loader and a sharded top-1/top-5 evaluator), imported when a run uses
it: registering the task imports neither (nor torch), so commands that only read records stay light.
"""

from __future__ import annotations

from daybreak.metrics import TOP1, TOP5
from daybreak.tasks import TASKS, InputSpec, LeaderboardFacts, Task, lazy, reader

HOOKS = "daybreak.tasks.imagenet_batches"

TASKS.add("imagenet", Task(
    name="imagenet",
    description="ImageNet (ILSVRC2012) 1000-class classification from the JPEG folders; no download (needs a login)",
    metric=TOP5, extra_metrics=(TOP1,), target=0.93, eval_split="the 50,000 validation images", num_classes=1000,
    load=reader("daybreak.data.imagenet", "load_imagenet"), reference_recipe="imagenet_resnet50",
    files="train/<wnid>/*.JPEG and val/<wnid>/*.JPEG, or a flat val/*.JPEG with LOC_val_solution.csv or "
          "val_labels.txt ('filename wnid' or 'filename index' per line)",
    input_spec=InputSpec(shape=(3, 224, 224), dtype="uint8"),
    leaderboard=LeaderboardFacts(title="ImageNet", dawnbench=True, dawnbench_folder="ImageNet",
                                 eval_split="the 50,000 validation images"),
    make_train_batches=lazy(HOOKS, "train_batches"), make_evaluator=lazy(HOOKS, "evaluator"),
    inference_inputs=lazy(HOOKS, "inference_inputs"), stand_in=lazy(HOOKS, "stand_in"),
))
