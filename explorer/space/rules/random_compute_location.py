"""Random compute location: sample where a producer is computed (root, inline, or a
loop of its consumer), the choice a later mutator revisits."""
from __future__ import annotations

from ...schedule.tree import realizes_under
from .. import analysis as A
from ..rule import ScheduleRule


class RandomComputeLocation(ScheduleRule):
    """For an untiled block that heads its own loop nest and has consumers:
    ``loc = sample_compute_location(block); compute_at(block, loc)``. A block annotated
    ``meta_schedule.random_compute_producer`` (by AddRFactor) also places its producer.
    """

    def apply(self, sch, block) -> list:
        func, name = sch.func, sch.get(block)
        if not self._eligible(func, name):
            return [sch]
        producer = None
        if A.RANDOM_COMPUTE_PRODUCER in A.block_annotations(func, name):
            producers = sch.get_producers(block)
            sch.unannotate(block, A.RANDOM_COMPUTE_PRODUCER)
            producer = producers[0] if len(producers) == 1 else None
        self._randomly_compute_at(sch, block)
        if producer is not None:
            self._randomly_compute_at(sch, producer)
        return [sch]

    @staticmethod
    def _eligible(func, name: str) -> bool:
        r, loops = A.realize_of(func, name)
        if not loops or A.TILING_STRUCTURE in dict(r.block.annotations):
            return False
        if len(realizes_under(loops[0])) > 1:
            return False
        return bool(A.consumers(func, name))

    @staticmethod
    def _randomly_compute_at(sch, block) -> None:
        loc = sch.sample_compute_location(block)
        sch.compute_at(block, loc)

