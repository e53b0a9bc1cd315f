"""Where a tuning run measures: the local worker pool (the default) or Dask workers.

A runner is named by a string, given to ``Tuner(runner=...)``, ``TaskScheduler``
and ``explorer tune --runner``: ``"local"`` (or None) for the ``Measurer`` on
this machine, ``"dask://HOST:PORT"`` for the Dask scheduler at that address
(``DaskMeasurer``). Dask is imported only for the latter.
"""
from __future__ import annotations

import re

from ..errors import MeasureError

_DASK = re.compile(r"^dask://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})/?$")


def parse_runner(runner) -> str | None:
    """None for the local pool, or the scheduler address (``tcp://HOST:PORT``) of a
    ``dask://HOST:PORT`` runner; MeasureError for anything else."""
    if runner is None or runner == "local":
        return None
    m = _DASK.match(runner) if isinstance(runner, str) else None
    if m is None or not 0 < int(m["port"]) < 65536:
        raise MeasureError(f"unknown runner {runner!r}: use 'local' (worker processes on this "
                           "machine, the default) or 'dask://HOST:PORT' (the Dask scheduler "
                           "at that address, e.g. dask://10.0.0.5:8786)")
    return f"tcp://{m['host']}:{int(m['port'])}"


def open_measurer(runner, target, config=None):
    """The measurer of ``runner`` for ``target``: a ``Measurer`` or a ``DaskMeasurer``
    (connected, with a worker of the target; MeasureError otherwise)."""
    address = parse_runner(runner)
    if address is None:
        from .measurer import Measurer
        return Measurer(target, config)
    from .dask_runner import DaskMeasurer
    return DaskMeasurer(address, target, config)
