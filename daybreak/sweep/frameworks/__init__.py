"""The reference programs of `daybreak throughput --frameworks` and the stand-alone protocol they print.

These files are programs, not modules of daybreak: each runs as ``python FILE`` in its own process, imports its
framework and its siblings ``throughput_log`` (the protocol) and ``reference`` (what the programs share), and
nothing of daybreak, so the same file runs where daybreak is not installed. daybreak.sweep.program launches them.
"""
