"""The mutator: proposes a neighbour of a trace by changing one of its choices.

Mutators work on the design part of a trace (what the rules recorded, without
what postprocessors appended); they return a new trace, or None when they find
nothing to change. Whether the neighbour is valid is the design space's
business (``DesignSpace.apply``); a mutator avoids what it can tell is invalid from
the decisions and its ``target`` alone (the tile-size mutator keeps a GPU tiling within
the limits ``VerifyGPUCode`` checks, see ``mutators/gpu_limits.py``), never by running
the postprocessors.
"""
from __future__ import annotations

import random
from abc import ABC, abstractmethod


class Mutator(ABC):
    """Base class of mutators. Subclasses implement ``apply``."""

    target = None

    def initialize(self, target) -> None:
        """Called by the design space with its ``Target`` before any ``apply``."""
        self.target = target

    @abstractmethod
    def apply(self, trace, rng: random.Random, workload):
        """A mutated copy of ``trace`` (a Trace) or None. ``workload`` (the space's
        Workload or PrimFunc) lets a mutator replay the trace to look at loops."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
