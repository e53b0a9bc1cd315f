"""One exception family for the whole engine.

Every message says what was asked, what is wrong, and how to fix it.
"""


class ExplorerError(Exception):
    """Base class of every error the engine raises on purpose."""


class ScheduleError(ExplorerError):
    """A schedule primitive was asked for something illegal; the schedule is unchanged."""


class TraceError(ExplorerError):
    """A trace (JSON or Python objects) is malformed, truncated or of an unknown version."""


class LowerError(ExplorerError):
    """A scheduled function cannot be lowered to a plain loop nest."""


class BuildError(ExplorerError):
    """A kernel could not be built for the requested target."""


class ArgumentError(ExplorerError):
    """A kernel was called with arrays of the wrong number, shape, dtype or layout."""


class MeasureError(ExplorerError):
    """Measuring a candidate failed (timeout, crash, wrong result)."""


class DatabaseError(ExplorerError):
    """A tuning database is unreadable or inconsistent."""


class WorkloadError(ExplorerError):
    """A workload (or its JSON) is malformed, or cannot be checked as asked."""
