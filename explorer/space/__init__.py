"""The stochastic search space (MetaSchedule's idea): schedule rules compose sketches
with sampling instructions, postprocessors finish or reject samples, mutators propose
neighbours.

    from explorer.space import DesignSpace
    space = DesignSpace(ops.gemm(256, 256, 256), target="llvm")
    schedules = space.sample(16, seed=0)

Extend a space with a rule of your own (see ``explorer.space.examples``)::

    space.add_rule(PackOperand("B"))
"""
from ..errors import PostprocError, SpaceError
from .design_space import DesignSpace
from .mutator import Mutator
from .postproc import Postproc
from .rule import ScheduleRule

__all__ = ["DesignSpace", "ScheduleRule", "Postproc", "Mutator", "SpaceError", "PostprocError"]
