"""DAWNBench-style leaderboard: submissions (daybreak runs and repeats, DAWNBench v1 files), provenance, rankings,
reproduction by the host, store, web site.

``daybreak leaderboard import|show|serve|export|reproduce|worker``; see :mod:`daybreak.leaderboard.commands`.
"""
