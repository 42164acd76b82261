"""Where entries and reproduction jobs are kept: daybreak.leaderboard.store.database (SQLAlchemy; SQLite or
PostgreSQL)."""
