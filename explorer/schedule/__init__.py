"""Schedules as probabilistic programs: primitives, sampling, traces."""
from .rv import INLINE, ROOT, BlockRV, ExprRV, LoopRV
from .schedule import Schedule
from .trace import Instruction, Trace

__all__ = ["Schedule", "Trace", "Instruction", "BlockRV", "LoopRV", "ExprRV", "ROOT", "INLINE"]
