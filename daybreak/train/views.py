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


class SpecData:
    """What a recipe that ``builds_from_spec`` is handed before the dataset is touched: the class count and the
    task's InputSpec, no tensors. Reading the training data here is a mistake the recipe's author must fix (move
    it to ``init_from_data``, or set ``builds_from_spec=False``), so it fails with that advice."""

    __slots__ = ("num_classes", "input_spec", "recipe")

    def __init__(self, num_classes: int, input_spec: Any, recipe: str):
        object.__setattr__(self, "num_classes", num_classes)
        object.__setattr__(self, "input_spec", input_spec)
        object.__setattr__(self, "recipe", recipe)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.input_spec.shape)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"recipe {object.__getattribute__(self, 'recipe')} declares builds_from_spec, so build() "
                             f"runs before the dataset is loaded and has no {name!r}: compute data statistics in "
                             "TrainSetup.init_from_data, or set builds_from_spec=False")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("the data a recipe is handed is read-only")

    def __repr__(self) -> str:
        return f"SpecData({self.num_classes} classes, input {self.input_shape})"
