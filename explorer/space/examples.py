"""Worked examples of user schedule rules: a user extends a space with one class.

A rule has one method, ``apply(sch, block) -> list of schedules``; ``add_rule``
puts it after the default rules, but before random compute location, whose
sampled choices change the loops (a rule after it would take different steps
in different samples, and its sketch would not replay).

``VectorizeInnermost`` -- always vectorize the innermost spatial loop by the
vector width::

    space = DesignSpace(ops.elementwise(1024, 1024), "llvm")
    space.add_rule(VectorizeInnermost())

What it changes, and nothing else:

- every block that multi-level tiling left alone (elementwise, transpose, softmax's
  blocks, a padding block) and whose innermost loop is spatial, a multiple of the
  target's vector lanes (16 fp32 lanes with AVX-512) and walks its output
  contiguously gains ``split(loop, [None, lanes])`` and ``vectorize`` of the inner
  part, in every sketch;
- the number of sketches and the decisions (``space.size()``) stay the same: the
  rule samples nothing;
- tiled blocks keep what parallel-vectorize-unroll gives them (their innermost
  tile is vectorized there).

Why: MetaSchedule's postprocessor vectorizes the innermost loops only while their
extent stays within 64 lanes, so ``C = max(2A + B, 0)`` over 1024 x 1024 gets
parallel rows and scalar columns, left to LLVM's own vectorizer; this rule
emits the vector code itself. (Measured: no faster here, 0.6 ms either way --
the operator is bound by memory and LLVM vectorizes that loop too -- but the
vector width no longer depends on the auto-vectorizer.)

``PackOperand`` -- read a named input through a copy computed once per tile of a
given level (``PackOperand("A", level=1)``): every tiled sketch that reads the
buffer gains ``cache_read(block, i, "global")`` and ``compute_at`` at the last
loop of that tile level (lowering compacts the copy to the region the tile uses);
sketches and decisions unchanged. The default CPU space already packs the input
that feeds the vectorized dimension (B of a gemm) in half its sketches.
"""
from __future__ import annotations

from . import analysis as A
from .rule import ScheduleRule


class VectorizeInnermost(ScheduleRule):
    """Split the innermost spatial loop of each untiled block by the vector width and
    vectorize the inner part. ``lanes`` defaults to the target's fp32 lanes."""

    def __init__(self, lanes: int | None = None):
        self.lanes = lanes

    def apply(self, sch, block) -> list:
        lanes = self.lanes or getattr(self.target, "vector_lanes", 4)
        func, name = sch.func, sch.get(block)
        real, loops = A.realize_of(func, name)
        if not loops or A.TILING_STRUCTURE in dict(real.block.annotations):
            return [sch]
        inner = loops[-1]
        if (not A.is_free(inner) or inner.extent % lanes
                or A.loop_iter_type(func, inner.var.name) != "S"
                or A.vectorizable_depth(func, name) < 1
                or _store_stride(real, inner.var.name) != 1):
            return [sch]
        _, vector = sch.split(sch.get_loops(block)[-1], [None, lanes])
        sch.vectorize(vector)
        return [sch]


def _store_stride(realize, loop: str):
    from ..ir.functor import substitute
    b = realize.block
    bind = {iv.var.name: v for iv, v in zip(b.iter_vars, realize.iter_values)}
    idx = tuple(substitute(i, bind) for i in b.body.indices)
    return A.access_stride(b.body.buffer.shape, idx, loop)


class PackOperand(ScheduleRule):
    """Read input ``buffer`` of each tiled block through a copy computed at the end of
    tile level ``level`` (1 = the outermost spatial tiles)."""

    def __init__(self, buffer: str = "A", level: int = 1):
        self.buffer = buffer
        self.level = level

    def apply(self, sch, block) -> list:
        func, name = sch.func, sch.get(block)
        real, _ = A.realize_of(func, name)
        structure = dict(real.block.annotations).get(A.TILING_STRUCTURE)
        reads = [b.name for b in real.block.reads()]
        # tile level L ends after L * (spatial variables) loops on the CPU structures,
        # which start with their S levels
        if (structure is None or self.buffer not in reads
                or not structure.startswith("S" * self.level)):
            return [sch]
        n_spatial = sum(1 for iv in real.block.iter_vars if iv.kind == "S")
        anchor = sch.get_loops(block)[self.level * n_spatial - 1]
        copy = sch.cache_read(block, reads.index(self.buffer), "global")
        sch.compute_at(copy, anchor)
        anns = dict(real.block.annotations)
        for key in (A.PARALLEL, A.VECTORIZE):   # made after parallel-vectorize-unroll ran
            if key in anns:
                sch.annotate(copy, key, anns[key])
        return [sch]
