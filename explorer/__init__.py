"""Schedule Explorer: explore, teach and tune tensor-program schedules.

The engine: tensor expressions (``te``), the operator library (``ops``),
schedules with traces (``Schedule``), lowering, backends (``build``), and,
on top, the search space, measurement and tuning.
"""
from . import te
from .backends import Target, build
from .errors import (ArgumentError, BuildError, DatabaseError, ExplorerError, LowerError,
                     MeasureError, ScheduleError, TraceError)
from .lower import lower
from .schedule import INLINE, ROOT, BlockRV, ExprRV, LoopRV, Schedule, Trace

__version__ = "0.1.0"
__all__ = ["te", "Target", "build", "lower", "Schedule", "Trace", "BlockRV", "LoopRV", "ExprRV",
           "ROOT", "INLINE", "ExplorerError", "ScheduleError", "TraceError", "BuildError",
           "LowerError", "ArgumentError", "MeasureError", "DatabaseError"]
