"""DAWNBench-style leaderboard: submissions (daybreak runs and repeats, DAWNBench v1 files, MLPerf results),
provenance, rankings, reproduction by the host, store, web site.

``daybreak leaderboard import|import-mlperf|show|score|serve|export|reproduce|worker``; see
:mod:`daybreak.leaderboard.commands`. Where an upload goes, in order:

- ``ingest/``: a file or an upload becomes one validated :class:`~daybreak.leaderboard.ingest.submission.Submission`
  or a one-line refusal naming the field: ``submission`` (the Submission, JSON limits), ``text_rules`` (what text
  is taken, NFC, names folded), ``dawnbench_import`` / ``runs_import`` (the readers), ``plausibility`` (a record's
  figures against each other and physics), ``systems`` (the structured system), ``importer`` (`leaderboard
  import`: finding files, reading them safely); MLPerf's readers are ``mlperf_import`` and ``mlperf_rules`` here;
- ``store/``: ``database`` keeps entries and reproduction jobs (SQLite or PostgreSQL, leases, migrations);
- ``ranking/``: ``objectives`` (what is ranked and how it is shown), ``query`` (a board's filters and order),
  ``score`` (AlgoPerf's cross-task score);
- ``web/``: ``app`` (the FastAPI app, the HTTP protocol's limits), ``limits`` (their values), ``pages`` (the
  Jinja2 pages and the static export), ``boardpage``, ``boardplot``, ``plot`` and ``templates/``;
- ``reproduce/``: ``plan`` (what re-running an entry takes) and ``worker`` (running it, the job queue's worker).

``tasks`` names the boards and their targets.
"""
