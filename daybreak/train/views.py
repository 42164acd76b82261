"""What a recipe is handed of a task's data: the training split and what it needs to build a model, never the
evaluation inputs or labels (they stay with the runner, so no recipe can tune on the test set)."""

from __future__ import annotations

from typing import Any

from daybreak.data.base import TaskData

# attributes of the readers' TaskData classes that hold or reach evaluation data
HIDDEN = frozenset({"eval_x", "eval_y", "val", "dev_split", "dev_features", "inference_inputs", "eval_features"})


class TrainingData:
    """A read-only view of ``TaskData`` without its evaluation split. Everything else (the training tensors,
    ``num_classes``, a reader's ``configure``/``tokenizer``/``train_features``) passes through."""

    __slots__ = ("_data",)

    def __init__(self, data: TaskData):
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name: str) -> Any:
        if name in HIDDEN:
            raise AttributeError(f"recipes are handed the training data only: {name!r} (evaluation data) stays "
                                 "with the runner")
        return getattr(object.__getattribute__(self, "_data"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("the training data a recipe is handed is read-only")

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(view, SquadData) holds, as for the data itself
        return type(object.__getattribute__(self, "_data"))

    @property
    def input_shape(self) -> tuple[int, ...]:
        data = object.__getattribute__(self, "_data")
        if data.train_x is not None:
            return tuple(data.train_x.shape[1:])
        return tuple(data.eval_x.shape[1:])  # the shape only (e.g. ImageNet's meta placeholder)

    def __repr__(self) -> str:
        data = object.__getattribute__(self, "_data")
        return f"TrainingData({type(data).__name__}, {0 if data.train_x is None else len(data.train_x)} training examples)"
