"""Schedule Explorer: explore, teach and tune tensor-program schedules.

The engine: tensor expressions (``te``), workloads (``Workload``: an operator
and what checks it; the library of them is ``ops``), schedules with traces
(``Schedule``), lowering, backends (``build``), and, on top, the search space,
measurement and tuning.
"""
from . import te
from .backends import build
from .target import Target
from .errors import (ArgumentError, BuildError, DatabaseError, ExplorerError, LowerError,
                     MeasureError, ScheduleError, TraceError, WorkloadError)
from .lower import lower
from .schedule import INLINE, ROOT, BlockRV, ExprRV, LoopRV, Schedule, Trace
from .workload import Workload

__version__ = "0.1.0"
__all__ = ["te", "Workload", "Target", "build", "lower", "Schedule", "Trace", "BlockRV", "LoopRV",
           "ExprRV", "ROOT", "INLINE", "ExplorerError", "ScheduleError", "TraceError",
           "BuildError", "LowerError", "ArgumentError", "MeasureError", "DatabaseError",
           "WorkloadError"]
