"""Reproduction by the host: what re-running an entry takes (plan) and running it, alone or as the job queue's
worker (worker)."""
