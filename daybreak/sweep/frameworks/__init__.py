"""The reference programs of `daybreak throughput --frameworks` and the stand-alone protocol they print.

These files are programs, not modules of daybreak: each runs as ``python FILE`` in its own process and imports its
framework and its siblings ``throughput_log`` (the protocol: its docstring is the protocol's one description) and
``reference`` (the options, the synthetic batch, the equivalence figures), and nothing of daybreak, so the same
file runs where daybreak is not installed - except ``pytorch_program.py``, whose model and step are daybreak's own.
daybreak.sweep.program launches them and checks what they report.

Adding a framework (MXNet, say) is one file and one line:

1. ``mxnet_program.py`` here: ``OPTS = reference.options()`` first (and anything the framework reads when it
   starts, from OPTS: threads, the device); the two models with daybreak's layer names so that ``--weights`` (an
   .npz of daybreak's PyTorch state dict) loads into them; BERT's head scoring ``batch.positions`` only; the
   training step (``reference.SGD`` / ``reference.ADAMW``); then ``reference.check`` (what it cannot run:
   ``unsupported``), ``reference.fail`` (what it should run but cannot here: a missing device), the threads applied
   by the framework's own API and true fp32 (TF32 off), and ``reference.run(opts, step, sync, framework=...,
   version=..., compiler=..., device=..., device_name=..., threads=..., inter_op_threads=..., math_precision=...,
   flops_per_step=..., layout=...)`` with what the framework says it runs; ``sync()`` returns the last step's loss
   read to the host. ``--describe`` prints ``reference.describe(params, flops, losses)`` for ``--check-steps`` + 1
   training steps (BatchNorm in training mode, dropout off).
2. An entry in daybreak.sweep.program.FRAMEWORKS (the modules it needs, its pip extra, the file, whether it runs
   several devices, its image layout). A framework that cannot share daybreak's interpreter names its own:
   ``mxnet_program.py`` (MXNet 1.9 needs NumPy < 1.24) runs with the Python that ``DAYBREAK_MXNET_PYTHON`` names
   (default ``.venv-mxnet/bin/python``, made by scripts/mxnet-venv.sh); any program also runs through
   ``--program "/path/to/venv/bin/python mxnet_program.py"``.
3. The tests are parametrized over FRAMEWORKS (tests/test_throughput_programs.py): the equivalence check against
   PyTorch (daybreak.sweep.equivalence) and a sweep through the protocol.
"""
