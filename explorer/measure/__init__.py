"""Measurement: build, run, check and time candidates in worker processes.

Roles as in MetaSchedule: ``LocalBuilder`` (replay the trace, lower, compile)
and ``LocalRunner`` (check against the numpy reference, then time), over a
``WorkerPool`` of persistent processes that may crash or hang without harm;
``Measurer`` puts them together for one target; ``InteractiveMeasurer`` measures
one schedule now in a kept-alive worker (a notebook's Run button),
``measure_roofline`` gives the host's measured peak and bandwidth, and
``busy_note`` says when other processes hold the cores a measurement needs.
Everything that crosses the process boundary is plain data: ``MeasureInput`` in,
``BuildResult`` and ``MeasureResult`` out; failures are values with ``error``
and ``error_kind``. ``DaskMeasurer`` measures on Dask workers instead of the
local pool, behind the same interface (Dask imported only when one is made).
"""
from .builder import LocalBuilder
from .check import Reference, ReferenceCache
from .config import RunConfig
from .dask_runner import DaskMeasurer
from .faults import FAULTS
from .load import busy_cores, busy_note, warn_if_busy
from .interactive import InteractiveMeasurer, InteractiveResult, interactive_config
from .measurer import Measurer, measure
from .pool import WorkerPool
from .result import ERROR_KINDS, BuildResult, MeasureInput, MeasureResult
from .roofline import Roofline, compulsory_bytes, intensity, measure_roofline
from .runner import LocalRunner

__all__ = ["MeasureInput", "MeasureResult", "BuildResult", "ERROR_KINDS", "RunConfig",
           "LocalBuilder", "LocalRunner", "Measurer", "measure", "WorkerPool", "Reference",
           "ReferenceCache", "FAULTS", "InteractiveMeasurer",
           "InteractiveResult", "interactive_config", "Roofline", "measure_roofline", "intensity",
           "compulsory_bytes",
           "DaskMeasurer", "busy_cores", "busy_note",
           "warn_if_busy"]
