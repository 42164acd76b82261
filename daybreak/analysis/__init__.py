"""Analyses of time-to-accuracy runs, after the DAWNBench analysis paper (Coleman et al.).

``repeat`` (stability over seeds), ``threshold`` (time-to-target against the accuracy threshold), ``roofline``
(achieved FLOP/s against the device's ceilings), ``scaling`` (speedup against devices), ``lesion`` (each
optimization switched off in turn), ``generalization`` (a trained model on another labelled set), ``compare``
(is A faster than B, with significance tests), ``score`` (AlgoPerf's cross-task score of recipes, optimizers or
labelled runs) and ``report`` (HTML + Markdown with every table and plot).

The arithmetic lives in :mod:`daybreak.analysis.stats` as pure functions; the other modules read and write
records; :mod:`daybreak.analysis.commands` adds the CLI commands.
"""
