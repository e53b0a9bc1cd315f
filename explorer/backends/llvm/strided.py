"""Strided vector accesses of the expression emitter that need no gather.

- ``strided_load``: a vector load whose lane ``i`` reads element ``base + stride * i``
  (the input row of a stride-2 convolution vectorized along its output columns) as
  ``stride`` contiguous vector loads and deinterleaving shuffles;
- the lane coefficient that decides a stride, also through a fused loop split back into
  two dimensions (``[f // k, f % k]``: contiguous), is ``analysis.lane_stride``: the
  vectorizer's lane-conflict check reads it too.

    before: %v = call @llvm.masked.gather(<16 x ptr> base + 2 * <0, 1, ..., 15>)
    after:  %a = load <16 x float> base;  %b = load <16 x float> base + 15
            %v = shufflevector %a, %b, <0, 2, ..., 14, 17, 19, ..., 31>
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...errors import BuildError
from ...ir.expr import BufferLoad
from .types import I32, I64, PTR, mem_type, poison, suffix, vector_const


def strided_load(ex, ptr, e: BufferLoad, stride: int, mask, align: int) -> ir.Value:
    """A vector load whose lane ``i`` reads element ``base + stride * i`` (the input
    row of a stride-2 convolution vectorized along its output columns), as
    ``stride`` contiguous vector loads and shuffles that pick every ``stride``-th
    element (a deinterleave: ``vpermt2ps`` on AVX-512, ``vshufps`` and permutes on
    AVX2) instead of a gather of single elements. The loads cover exactly the
    range the lanes read, ``[base, base + stride * (n - 1)]``: the first ones at
    ``base + j * n``, the last ending at the last lane's element, so nothing past
    what a gather touches is read. Under a lane mask each load is masked by the
    lanes whose elements it supplies (the others off). Measured with the
    depthwise layers of MobileNet-V2 (``benchmarks/depthwise.py``). ``ex``: the
    ``ExprEmitter`` inside a vectorized loop; ``align``: the element's alignment."""
    n = ex.lanes
    plan = deinterleave_plan(n, stride)
    base = ex.gep(ptr, e, lane0=True, inbounds=mask is None, mask=mask)
    vt = mem_type(e.buffer.dtype, n)
    pieces = []
    for start, lanes in plan:
        addr = base if start == 0 else ex.b.gep(
            base, [ir.Constant(I64, start)], inbounds=mask is None,
            source_etype=mem_type(e.buffer.dtype))
        if mask is None:
            pieces.append(ex.b.load(addr, typ=vt, align=align))
            continue
        # element k of this piece is lane lanes[k]'s (or nobody's: off)
        sel = [lanes.get(k, n) for k in range(n)]
        zero = vector_const(mask.type.element, (0,) * n)
        m = ex.b.shuffle_vector(mask, zero, vector_const(I32, tuple(sel)))
        fn = ex.fn.mod.declare(f"llvm.masked.load.{suffix(vt)}.p0", vt,
                                 [PTR, I32, m.type, vt])
        pieces.append(ex.b.call(fn, [addr, ir.Constant(I32, align), m, poison(vt)]))
    # lane i from the piece that holds it: a chain of two-operand shuffles
    where = {}
    for p, (_, lanes) in enumerate(plan):
        for k, i in lanes.items():
            where[i] = (p, k)
    if len(pieces) == 1:
        return pieces[0]
    acc = None
    for p in range(1, len(plan)):
        sel = []
        for i in range(n):
            q, k = where[i]
            if acc is None:
                sel.append(k if q == 0 else n + k if q == 1 else 0)
            else:
                sel.append(n + k if q == p else i)
        first = pieces[0] if acc is None else acc
        acc = ex.b.shuffle_vector(first, pieces[p], vector_const(I32, tuple(sel)))
    return acc


MAX_SHUFFLED_STRIDE = 4   # wider strides gather (a load per `stride` lanes is no better)


def deinterleave_plan(n: int, stride: int) -> list:
    """The contiguous vector loads of ``n`` elements that cover the elements
    ``stride * i`` (``i < n``) of a strided vector load, as ``(start, {element of the
    load: lane})`` pairs. Loads start at ``j * n`` for ``j < stride - 1``; the last one
    ends at the last lane's element ``stride * (n - 1)``, so the union is exactly
    ``[0, stride * (n - 1)]``. Every lane comes from the first load that holds it."""
    if not 2 <= stride <= n:
        raise BuildError(f"deinterleave_plan: stride {stride} must lie in [2, {n}] lanes")
    last = stride * (n - 1) - (n - 1)
    starts = [j * n for j in range(stride - 1) if j * n < last] + [last]
    plan = [(s, {}) for s in starts]
    for i in range(n):
        off = stride * i
        for s, lanes in plan:
            if s <= off < s + n:
                lanes[off - s] = i
                break
    return [(s, lanes) for s, lanes in plan if lanes]
