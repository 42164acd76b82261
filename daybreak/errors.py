"""Errors a user can cause. The CLI prints their one-line message (no traceback) and exits non-zero."""


class DaybreakError(Exception):
    """Base class: a mistake or condition the user can fix. ``str(err)`` is a one-line message."""

    exit_code = 2


class ConfigError(DaybreakError):
    """A bad flag value, an unknown name, an inconsistent combination of options."""


class DataError(DaybreakError):
    """A dataset that is missing, corrupt, truncated or not in the expected format."""


class ChecksumError(DataError):
    """Files that exist but do not match the official checksums."""


class OfflineError(DataError):
    """A download was needed but the network could not be reached."""


class RecordError(DaybreakError):
    """A run directory or record file that is missing or cannot be parsed."""
