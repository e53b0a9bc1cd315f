"""The schedule rule: one small class that turns a schedule and a block into schedules.

A rule looks at one block of a schedule and returns the schedules it makes of it:
``[sch]`` when it does not apply, several when it branches (each branch becomes a
sketch). Rules may call any schedule primitive, sampling instructions included:
those become the decisions of the design space.

    class VectorizeInner(ScheduleRule):
        def apply(self, sch, block):
            loops = sch.get_loops(block)
            ...
            return [sch]

``DesignSpace`` applies each rule, in order, to every block of the original
function, consumers before producers (post-order, as MetaSchedule's
``PostOrderApply``), then once more to the function as a whole through
``apply_root`` (MetaSchedule's root block; we have none).
"""
from __future__ import annotations

from abc import ABC, abstractmethod


class ScheduleRule(ABC):
    """Base class of schedule rules. Subclasses implement ``apply``."""

    target = None

    def initialize(self, target) -> None:
        """Called by the design space with its ``Target`` before any ``apply``."""
        self.target = target

    @abstractmethod
    def apply(self, sch, block) -> list:
        """Schedules made from ``sch`` by this rule at ``block`` (a BlockRV)."""

    def apply_root(self, sch) -> list:
        """Schedules made from ``sch`` for the function as a whole; by default none."""
        return [sch]

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if k != "target")
        return f"{type(self).__name__}({fields})"
