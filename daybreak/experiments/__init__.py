"""Experiments: several runs, each a fresh process, arms interleaved, executed locally or on Slurm."""
