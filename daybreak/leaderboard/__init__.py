"""DAWNBench-style leaderboard: submissions (daybreak runs, DAWNBench v1 files), rankings, store, web site.

``daybreak leaderboard import|show|serve|export``; see :mod:`daybreak.leaderboard.commands`.
"""
