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


class RaceError(ExplorerError):
    """A GPU-bound program, run thread by thread, let two threads touch one element of a
    shared or global buffer between two barriers with one of them writing, or left
    some threads of a block waiting at a barrier the others never reach."""


class KernelFault(ExplorerError):
    """A built kernel faulted while running (an out-of-bounds access, an integer division
    by zero): the emulator stops the launch and names the kernel, block and thread."""


class MeasureError(ExplorerError):
    """Measuring a candidate failed (timeout, crash, wrong result)."""


class DatabaseError(ExplorerError):
    """A tuning database is unreadable or inconsistent."""


class WorkloadError(ExplorerError):
    """A workload (or its JSON) is malformed, or cannot be checked as asked."""


class SpaceError(ExplorerError):
    """A design space could not produce valid schedules (too few valid samples after a
    bounded number of tries, a trace that belongs to no sketch, a rule that broke)."""


class PostprocError(SpaceError):
    """A postprocessor rejected a candidate; the message is the reason."""


class FeatureError(ExplorerError):
    """Features cannot be extracted from what was given."""


class CostModelError(ExplorerError):
    """A cost model was given bad input, or a saved model cannot be loaded."""


class UsageError(ExplorerError):
    """The command line asked for something that does not exist or cannot be (the
    ``explorer`` command prints it as a usage error, exit status 2)."""
