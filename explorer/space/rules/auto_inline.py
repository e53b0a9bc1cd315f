"""Auto-inline: fold cheap injective blocks into their consumers (or producers)."""
from __future__ import annotations

from ...errors import ScheduleError
from ...schedule.tree import find_block, iter_dims, realizes_under, writers
from .. import analysis as A
from ..rule import ScheduleRule


class AutoInline(ScheduleRule):
    """Inline a spatial block into its consumers (``compute_inline``) or, when
    ``into_producer`` and that fails, into its only producer if that one is spatial too
    (``reverse_compute_inline``; e.g. relu into bias_add on GPU).

    As MetaSchedule's ``AutoInline``: on CPU only into consumers, never a block with
    an if-then-else (padding) or an ``exp`` unless the whole function is spatial; on
    GPU both ways and without those limits. Deterministic: no sketches, no decisions.
    """

    def __init__(self, into_producer: bool = False, into_consumer: bool = True,
                 disallow_if_then_else: bool = True, require_injective: bool = True,
                 require_ordered: bool = True, disallow_op=("exp",)):
        self.into_producer = into_producer
        self.into_consumer = into_consumer
        self.disallow_if_then_else = disallow_if_then_else
        self.require_injective = require_injective
        self.require_ordered = require_ordered
        self.disallow_op = tuple(disallow_op)

    def apply(self, sch, block) -> list:
        func, name = sch.func, sch.get(block)
        if not self.allowed(func, name):
            return [sch]
        if self.into_consumer and A.consumers(func, name) and not A.is_output(func, name):
            if _try(sch.compute_inline, block):
                return [sch]
        if self.into_producer and self._single_spatial_producer(func, name):
            _try(sch.reverse_compute_inline, block)
        return [sch]

    def allowed(self, func, name: str) -> bool:
        """The conditions on the block itself (spatial, allowed ops, index pattern)."""
        b = find_block(func, name)[0].block
        if b.is_reduction:
            return False
        pure_spatial = not any(r.block.is_reduction for r, _ in realizes_under(func.body))
        if not pure_spatial:
            if self.disallow_op and A.has_op(func, name, self.disallow_op):
                return False
            if self.disallow_if_then_else and A.has_if_then_else(func, name):
                return False
        dims = iter_dims(b, b.body.indices)
        if self.require_injective and (dims is None or None in dims):
            return False
        if self.require_ordered and dims is not None:
            used = [d for d in dims if d is not None]
            if used != sorted(used):
                return False
        return True

    @staticmethod
    def _single_spatial_producer(func, name: str) -> bool:
        b = find_block(func, name)[0].block
        producers = {w for buf in b.reads() for w in writers(func, buf.name)}
        return (len(producers) == 1
                and not find_block(func, producers.pop())[0].block.is_reduction)


def _try(prim, block) -> bool:
    try:
        prim(block)
        return True
    except ScheduleError:  # the primitive's own legality gate said no: leave the block
        return False
