"""Pack layout: offer the packed-panel layout of a tiled block's packed operand.

Multi-level tiling's read cache copies the panel of B that a column tile uses
(``C[i, j] += A[i, k] * B[k, j]``) into contiguous memory, ``B_global[k, j]``
compacted to the tile: the micro-kernel then walks ``k`` at a stride of the
whole panel width, ``j1 * j2 * j3`` columns. BLIS (and OpenBLAS, which numpy
calls) store the panel as slivers of the register tile's ``nr`` columns, each
contiguous over ``k``. This rule makes that form reachable: a sketch with the
copy blocked by the register tile's width (the innermost tile factor ``j3`` of
the vectorized loop, a decision of the tiling, so the panel follows the tile
when the search mutates it) and one without, as multi-level tiling's "may"
caches; a draw takes one of the two at random (seeded), the search keeps
whichever measures faster::

    v0, v1, v2, v3 = sch.sample_perfect_tile(j, n=4, max_innermost_factor=64)
    ...
    sch.transform_layout(C, ["read", 1], [1, 0, 2], factors=[None, v3])
    # B_global[k, j] -> B_global[j // v3, k, j % v3]: the k walk is contiguous

The same holds for the weight of the channel-vectorized convolution
(``W_global[c, r, s, k] -> W_global[k // k3, c, r, s, k % k3]``, NCHW[x]c-style).
The tiling's inner factor is sampled among divisors up to ``max_innermost_factor``;
on the CPU a full register row is a multiple of the target's vector lanes, the
width the expert schedules pick (``explorer.space.expert``).

The rule applies where it is decisive: the parameter copied is larger than the
target's L2 cache (``min_bytes``); one that fits is read from cache whatever its
layout, and smaller functions keep the default space unchanged.

The cost of the layout change is counted: the copy that packs runs inside the
kernel, once per task of the tile it is computed at, and its time is in every
measurement of a candidate (nothing is packed ahead, at load time).
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import ScheduleError, SpaceError
from ...ir.expr import BufferLoad
from ...ir.functor import expr_vars
from ...schedule.tree import find_block, writers
from ...schedule.rv import ExprRV
from .. import analysis as A
from ..rule import ScheduleRule


class PackLayout(ScheduleRule):
    """For a tiled block (multi-level tiling's annotation) that reads a packed copy whose
    last dimension feeds the vectorized loop: the sketch as it is, and one with the copy
    blocked by the vectorized loop's tile factor (``"may"``); ``req="must"`` keeps only
    the blocked one."""

    def __init__(self, req: str = "may", min_bytes: int | None = None):
        if req not in ("may", "must"):
            raise SpaceError(f"PackLayout: req must be 'may' or 'must', not {req!r}")
        if min_bytes is not None and (not isinstance(min_bytes, int) or min_bytes < 0):
            raise SpaceError(f"PackLayout: min_bytes must be an int >= 0 or None (the "
                             f"target's L2 size), not {min_bytes!r}")
        self.req = req
        self.min_bytes = min_bytes

    def decisive(self, operand) -> bool:
        """Is the copied parameter larger than ``min_bytes`` (default: the target's L2)?
        One that fits in L2 is read from cache whatever its layout (gemm 512: 1 MB of B,
        packed and unpacked panels within noise on one AVX-512 core; gemm 1024, 4 MB:
        panels 2-4 register tiles wide 13-15% faster packed)."""
        limit = self.min_bytes
        if limit is None:
            limit = getattr(self.target, "l2_bytes", 0) or 1024 * 1024
        return math.prod(operand.shape) * np.dtype(operand.dtype).itemsize > limit

    def apply(self, sch, block) -> list:
        target = self.target
        if target is None or target.is_gpu or getattr(target, "vector_lanes", 1) <= 1:
            return [sch]
        found = pack_plan(sch.func, sch.get(block))
        if found is None:
            return [sch]
        index, buf, loop, operand = found
        factor = inner_factor(sch, loop)
        if factor is None or not self.decisive(operand):
            return [sch]
        packed = sch.copy()
        ndim = buf.ndim
        # split dims: 0..ndim-2 whole, ndim-1 outer, ndim inner -> outer first, inner last
        axes = [ndim - 1] + list(range(ndim - 1)) + [ndim]
        packed.transform_layout(block, ("read", index), axes, [None] * (ndim - 1) + [factor])
        return [packed] if self.req == "must" else [sch, packed]


def inner_factor(sch, loop: str):
    """The factor (an ExprRV of a sampling instruction, or an int) of the split whose
    innermost part is loop ``loop``; None if no split made it."""
    for ins in reversed(sch.trace.insts):
        if ins.kind != "split" or not ins.outputs:
            continue
        try:
            name = sch.get(ins.outputs[-1])
        except ScheduleError:      # a handle an earlier primitive removed
            continue
        if name == loop:
            f = ins.inputs[1][-1]
            return f if isinstance(f, (ExprRV, int)) else None
    return None


def pack_plan(func, block: str):
    """(read index, buffer, innermost loop name, parameter copied) of the copy of a parameter that ``block``
    reads at the iteration variable of its innermost loop in the last dimension (and
    nowhere else), when the block is tiled; None otherwise. A copy already blocked
    (``j % v``) does not match."""
    r, loops = A.realize_of(func, block)
    b = r.block
    if A.TILING_STRUCTURE not in dict(b.annotations) or not loops:
        return None
    inner = loops[-1].var.name
    bound = [iv for iv, val in zip(b.iter_vars, r.iter_values) if inner in expr_vars(val)]
    if len(bound) != 1 or bound[0].kind != "S":
        return None
    var = bound[0].var.name
    for index, buf in enumerate(b.reads()):
        if (buf not in func.alloc_buffers or buf.scope != "global" or buf.ndim < 2
                or buf == b.body.buffer):
            continue
        idxs = b.read_indices(buf)
        if len(idxs) != 1:
            continue
        idx = idxs[0]
        operand = _copied(func, buf)
        if (getattr(idx[-1], "name", None) == var and operand is not None
                and not any(var in expr_vars(e) for e in idx[:-1])):
            return index, buf, loops[-1].var.name, operand
    return None


def _copied(func, buf):
    """The parameter ``buf`` copies when one block writes it with a plain load of one (a
    cache_read), else None (a padding stage: its windows overlap, blocking them would break
    the vector loads)."""
    names = writers(func, buf.name)
    if len(names) != 1:
        return None
    value = find_block(func, names[0])[0].block.body.value
    ok = isinstance(value, BufferLoad) and value.buffer in func.params
    return value.buffer if ok else None
