"""Timing programs daybreak did not write: `daybreak time -- CMD ...` reads their MLPerf log stream."""
