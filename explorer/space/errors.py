"""Errors of the search space: a space that cannot produce what was asked of it."""
from __future__ import annotations

from ..errors import ExplorerError


class SpaceError(ExplorerError):
    """A design space could not produce valid schedules (too few valid samples after a
    bounded number of tries, a trace that belongs to no sketch, a rule that broke)."""


class PostprocError(SpaceError):
    """A postprocessor rejected a candidate; the message is the reason."""
