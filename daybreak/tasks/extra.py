"""The DAWNBench tasks whose data does not sit in memory as image tensors: ImageNet (top-5) and SQuAD v1.1 (F1).

Imported at the bottom of daybreak/tasks/__init__.py, which registers them next to the built-in tasks.
"""

from __future__ import annotations

from daybreak.tasks import TASKS, Task, reader


TASKS.add("imagenet", Task(
    name="imagenet",
    description="ImageNet (ILSVRC2012) 1000-class classification from the JPEG folders; no download (needs a login)",
    metric="top5", target=0.93, eval_split="the 50,000 validation images", num_classes=1000,
    load=reader("daybreak.data.imagenet", "load_imagenet"), report_top5=True, dawnbench_name="ImageNet",
    files="train/<wnid>/*.JPEG and val/<wnid>/*.JPEG, or a flat val/*.JPEG with LOC_val_solution.csv or "
          "val_labels.txt ('filename wnid' or 'filename index' per line)",
))
TASKS.add("squad", Task(
    name="squad",
    description="SQuAD v1.1 extractive question answering, span F1 on dev (BERT WordPiece features)",
    metric="f1", target=0.75, eval_split="dev-v1.1.json (10,570 questions)", num_classes=0,  # not classification
    load=reader("daybreak.data.squad", "load_squad"), dawnbench_name="SQuAD",
    files="train-v1.1.json, dev-v1.1.json (downloaded if missing) and vocab.txt (the BERT model's WordPiece "
          "vocabulary; never downloaded)",
))
