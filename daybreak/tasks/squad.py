"""squad: SQuAD v1.1 extractive question answering, DAWNBench's F1 0.75 task.

The reader (daybreak.data.squad) parses, validates and tokenizes the files and cuts the windows;
daybreak.tasks.squad_batches hooks them to the runner (training windows on the device, an evaluator scoring the
official v1.1 EM/F1), imported when a run uses it: registering the task imports neither (nor torch).
"""

from __future__ import annotations

from daybreak.data.wordpiece import DEFAULT_MAX_SEQ_LEN
from daybreak.metrics import F1
from daybreak.tasks import TASKS, InputSpec, LeaderboardFacts, Task, lazy, reader

HOOKS = "daybreak.tasks.squad_batches"

TASKS.add("squad", Task(
    name="squad",
    description="SQuAD v1.1 extractive question answering, span F1 on dev (BERT WordPiece features)",
    metric=F1, target=0.75, eval_split="dev-v1.1.json (10,570 questions)", num_classes=0,  # not classification
    load=reader("daybreak.data.squad", "load_squad"), reference_recipe="squad_bert_base",
    files="train-v1.1.json, dev-v1.1.json (downloaded if missing) and vocab.txt (the BERT model's WordPiece "
          "vocabulary; never downloaded)",
    input_spec=InputSpec(shape=(3, DEFAULT_MAX_SEQ_LEN), dtype="int64", kind="tokens", value_range=(0, 1)),
    leaderboard=LeaderboardFacts(title="SQuAD 1.1", dawnbench=True, dawnbench_folder="SQuAD", eval_split="the dev set"),
    make_train_batches=lazy(HOOKS, "train_batches"), make_evaluator=lazy(HOOKS, "evaluator"),
))
