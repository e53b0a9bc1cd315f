"""Software prefetch, spread over a vector loop: a vectorized loop annotated
``software_prefetch = k`` fetches, with each vector it loads contiguously from a
parameter of two or more dimensions, the same columns ``k`` rows further down.

A row-wise chain (softmax, layer norm) reads a row from memory in its first pass and
runs its later passes (exp, sums, the normalization) on the row in cache while memory
idles; a 4 KiB row is one page, and the hardware prefetchers stop at page borders, so
the next row's first pass started cold. One prefetch per cache line, issued from the
vector loop of a compute-heavy pass, asks for the next row while this one computes:
the tuned softmax went from 65-73% to 93-94% of a copy of the same array on the
session-9 Intel Xeon (one thread, 1024 x 1024). Where it is issued matters, which is
why the schedule says it: all prefetches at the top of the row (a burst of 64 lines
that fills the line-fill buffers) gained nothing, and prefetching from two passes of
the same row was slower than from one. A staged transpose's copy loop reads a tile's
rows a page apart, a few lines each; prefetching rows further down serves it the same
way.

What is fetched: for every load in the loop's body from a parameter buffer of two or
more dimensions whose elements are contiguous along the lane, the address of its
first lane plus ``k`` times the buffer's row (its last dimension), one
``prefetcht0`` per cache line the vector covers (``llvm.prefetch``: read, locality 3).
A prefetch never faults and changes no value, so the last rows' prefetches past the
buffer's end are harmless (the address is computed without ``inbounds``). Masked
passes (a guarded tail) fetch nothing.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...errors import BuildError
from ...ir.functor import collect_loads, walk_stmt
from ...ir.stmt import BufferStore
from .analysis import has_unsafe
from .types import ELEM_BYTES, I8, I32, I64, PTR, VOID

PREFETCH = "software_prefetch"   # vectorized-loop annotation: rows ahead (0: none)
LINE_BYTES = 64                  # x86's cache line
MAX_ROWS_AHEAD = 1 << 16         # a farther distance is a mistake, not a schedule


def rows_ahead(loop) -> int:
    """The loop's prefetch distance in rows (0: none); an annotation that is not a
    whole number of rows in [0, MAX_ROWS_AHEAD] is refused, saying what to give."""
    k = loop.annotation(PREFETCH, 0)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_ROWS_AHEAD:
        raise BuildError(f"loop {loop.var.name}: annotation {PREFETCH}={k!r} must be a "
                         f"whole number of rows ahead in [0, {MAX_ROWS_AHEAD}] (0: no "
                         f"prefetch); fix the annotate() call")
    return k


def _loads(loop, params: frozenset) -> tuple:
    """The distinct loads of ``loop``'s body from parameter buffers of >= 2 dimensions
    with pure indices, in order."""
    out, seen = [], set()
    for node, _ in walk_stmt(loop.body):
        if not isinstance(node, BufferStore):
            continue
        for ld in collect_loads(node.value):
            key = (ld.buffer.name, ld.indices)
            if (ld.buffer.name in params and len(ld.buffer.shape) >= 2 and key not in seen
                    and not any(has_unsafe(i) for i in ld.indices)):
                seen.add(key)
                out.append(ld)
    return tuple(out)


def emit(gen, loop, lanes: int) -> None:
    """At the top of one vector pass of ``lanes`` lanes of ``loop`` (its variable bound
    to the pass's first lane), the prefetches its annotation asks for."""
    k = rows_ahead(loop)
    if not k or gen.mask is not None or lanes < 2:
        return
    st = gen.st
    params = frozenset(p.name for p in st.mod.func.params)
    loads = st.mod.memo("prefetch loads", loop, lambda: _loads(loop, params))
    fn = None
    for ld in loads:
        if gen.ex.coeff(ld) != 1:
            continue
        size = ELEM_BYTES[ld.buffer.dtype]
        ahead = k * ld.buffer.shape[-1] * size
        first = gen.ex.gep(st.buffer_ptr(ld.buffer), ld, lane0=True)
        if fn is None:
            fn = st.mod.declare("llvm.prefetch.p0", VOID, [PTR, I32, I32, I32])
        for off in range(0, lanes * size, LINE_BYTES):
            addr = gen.b.gep(first, [ir.Constant(I64, ahead + off)], source_etype=I8)
            gen.b.call(fn, [addr, ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])
