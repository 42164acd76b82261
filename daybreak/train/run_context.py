"""The measurement context of a run (records.run.MeasurementContext): what is known before it starts (the code, the
packages) and what the machine was doing while it ran (sampled by daybreak.measure.context)."""

from __future__ import annotations

import inspect

import torch

from daybreak.measure.context import ContextSampler, file_sha256, git_remote, git_state, package_versions
from daybreak.recipes import Recipe
from daybreak.records.run import MeasurementContext
from daybreak.train.recorder import RunRecorder
from daybreak.train.spec import RunSpec


def static_context(recipe: Recipe, spec: RunSpec) -> MeasurementContext:
    """What is known before the run: the code (git state and SHA-256 of the recipe's file) and the packages."""
    recipe_file = spec.recipe_file
    if recipe_file is None:
        try:
            recipe_file = inspect.getsourcefile(recipe.build)
        except TypeError:
            recipe_file = None
    commit, dirty = git_state(recipe_file) if recipe_file else (None, None)
    return MeasurementContext(git_commit=commit, git_dirty=dirty,
                              git_remote=git_remote(recipe_file) if commit and recipe_file else None,
                              packages=package_versions(),
                              recipe_file=recipe_file, recipe_sha256=file_sha256(recipe_file) if recipe_file else None,
                              threads_used=torch.get_num_threads(), interop_threads=torch.get_num_interop_threads())


def finish_context(recorder: RunRecorder, sampler: ContextSampler) -> None:
    r = recorder.result
    try:
        fields = sampler.stop()
    except Exception:  # noqa: BLE001 - context is informative; never lose a result over it
        return
    warnings = fields.pop("warnings", [])
    for key, value in fields.items():
        setattr(r.context, key, value)
    r.context.warnings = warnings
    r.warnings.extend(w for w in warnings if w not in r.warnings)
    recorder.save()
