"""Streaming (non-temporal) stores: beneath a serial or parallel loop annotated
``streaming_store = 1``, the full vectors written to parameter arrays go out with
``movntps`` (LLVM ``!nontemporal``) where their address is a whole register.

An ordinary store of a line that is not in cache first reads it (a read for
ownership) and writes it back when it is evicted. A streaming store writes the
whole line through a write-combining buffer, neither reading it nor keeping it. A
transpose is where this decides: each of its tiles writes 16 rows a page apart, and
the read for ownership of each line is a miss that the hardware prefetchers do not
follow. Hand-written AVX-512 16 x 16 shuffles on the session-10 Intel Xeon (one
thread, tiles of 64 x 64 to 128 x 128, output aligned to 64 bytes): 58-63% -> 86-88%
of a copy of the same array at 1024 x 1024, 57-72% -> 90-101% at 4096 x 1024. A
streaming store must be aligned to its size (``movntps`` faults otherwise), and
partial lines are ruinous: the same kernel storing 16-byte pieces to an output 16
bytes past a line ran at 20% of a copy.

Which stores stream:

- a register tile transpose (``tile_transpose``) whose squares cover their output
  rows whole (``square_columns``) moves every square right to where the output's
  lines begin, whatever the array's alignment (numpy's large arrays start 16 bytes
  past a line): all its stores stream;
- any other contiguous vector store without a lane mask to a parameter, whose
  offset from the array's start is a multiple of its vector (``aligned_offset``,
  decided from the index), streams when the address is aligned at run time
  (``store_if_aligned``: a branch per store, the ordinary store otherwise).

Streaming stores are weakly ordered: each iteration of the annotated loop ends with
an ``sfence`` on the thread that stored. Put the annotation on a loop whose
iterations write many lines (a row of tiles, not one vector). A parallel loop nested
inside the annotated loop (outlined apart) keeps ordinary stores, and so do targets
that are not x86. Whether streaming pays is the schedule's choice: the array written
leaves the cache, so a consumer that reads it soon reads memory.
"""
from __future__ import annotations

import functools

import llvmlite.binding as llvm
import llvmlite.ir as ir

from ...errors import BuildError
from ...ir.arith import linear_terms
from ...ir.functor import collect_loads, expr_vars, walk_stmt
from ...ir.stmt import BufferStore
from .analysis import affine_form
from .types import ELEM_BYTES, I32, I64, VOID, const_int

STREAMING = "streaming_store"   # serial or parallel loop annotation: 1 streams, 0 does not


def enabled(loop) -> bool:
    """Does ``loop``'s annotation ask for streaming stores (on an x86 host)? A value
    that is not 0 or 1 (False or True) is refused, and so is a true one on a loop the
    annotation cannot serve (vectorized or unrolled: annotate a loop around it)."""
    v = loop.annotation(STREAMING, 0)
    if isinstance(v, float) or v not in (0, 1):
        raise BuildError(f"loop {loop.var.name}: annotation {STREAMING}={v!r} must be 0 or 1 "
                         f"(1: streaming stores beneath); fix the annotate() call")
    if v and loop.kind not in ("serial", "parallel"):
        raise BuildError(f"loop {loop.var.name}: annotation {STREAMING} is read on serial and "
                         f"parallel loops only, not on a {loop.kind} one; annotate a loop "
                         f"around it")
    return bool(v) and _x86()


@functools.lru_cache(maxsize=None)
def _x86() -> bool:
    return llvm.get_process_triple().split("-")[0] in ("x86_64", "i386", "i686")


def stores_params(loop, params: frozenset) -> bool:
    return any(isinstance(node, BufferStore) and node.buffer.name in params
               for node, _ in walk_stmt(loop.body))


def emit_body(gen, loop, body) -> None:
    """One iteration of annotated ``loop``: ``body()`` with streaming stores, then an
    sfence (nothing changes when the loop stores no parameter)."""
    params = gen.st.mod.param_names
    if not gen.st.mod.memo("streams", loop, lambda: stores_params(loop, params)):
        body()
        return
    saved, gen.streaming = gen.streaming, True
    try:
        body()
    finally:
        gen.streaming = saved
    gen.b.call(gen.st.mod.declare("llvm.x86.sse.sfence", VOID, []), [])


def _register(gen, dtype: str, lanes: int) -> int:
    """Bytes of the vector a pass of ``lanes`` lanes stores per register."""
    return min(lanes, gen.st.mod.hw_lanes) * ELEM_BYTES[dtype]


def store(gen, value: ir.Value, addr: ir.Value, dtype: str, lanes: int) -> None:
    """A streaming store of ``value`` at ``addr``, which the caller knows is aligned
    to the register."""
    instr = gen.b.store(value, addr, align=_register(gen, dtype, lanes))
    instr.set_metadata("nontemporal", gen.st.mod.module.add_metadata([ir.Constant(I32, 1)]))


def store_if_aligned(gen, value, addr, dtype: str, lanes: int, align: int) -> None:
    """A streaming store where ``addr`` is aligned at run time, an ordinary one (of
    alignment ``align``) otherwise."""
    b = gen.b
    low = ir.Constant(I64, _register(gen, dtype, lanes) - 1)
    ok = b.icmp_unsigned("==", b.and_(b.ptrtoint(addr, I64), low), ir.Constant(I64, 0))
    with b.if_else(ok) as (then, otherwise):
        with then:
            store(gen, value, addr, dtype, lanes)
        with otherwise:
            b.store(value, addr, align=align)


def _multiple_of(v: ir.Value, k: int) -> bool:
    """Is the i64 value ``v`` known to be a multiple of ``k`` (a constant, or a product
    with a constant that is)?"""
    c = const_int(v)
    if c is not None:
        return c % k == 0
    if isinstance(v, ir.Instruction) and v.opname == "mul":
        return any(const_int(o) is not None and const_int(o) % k == 0 for o in v.operands)
    return False


def aligned_offset(gen, s: BufferStore, ex) -> bool:
    """Is the lane-0 element of contiguous vector store ``s`` a multiple of its
    register's lanes from the buffer's start, in every iteration (its flat index's
    coefficients, constant and the lane's first value all multiples)?"""
    lanes = min(ex.lanes, gen.st.mod.hw_lanes)
    if lanes * ELEM_BYTES[s.buffer.dtype] < 16:
        return False                # no streaming store narrower than 128 bits
    const, coefs, atoms = gen.st.mod.memo("streaming form", s, lambda: affine_form(
        s.buffer.shape, s.indices))
    if const % lanes or any(c % lanes for c, _ in atoms):
        return False
    for name, c in coefs:
        if name == ex.lane:
            if c != 1 or not _multiple_of(gen.st.vars[name], lanes):
                return False
        elif c % lanes:
            return False
    return True


def square_columns(store: BufferStore, lane: str, n: int, ranges: dict):
    """For the store of a register tile transpose of ``n`` x ``n`` (vector variable
    ``lane``): the loop variables of the square's first column when the squares
    cover each output row whole and nothing else depends on that column, so that
    moving every square right by up to ``n - 1`` lanes (and storing the last one and
    the row's first one unmoved) writes the same elements; None otherwise.

    Required: the row's last index is ``lane + sum(c * x)`` over loop variables ``x``
    from 0 whose coefficients form the mixed radix of the row (``n``, then each the
    one before times its loop's extent, the last times its extent the row's length, a
    multiple of ``n``); no other index of the store uses them; and every load of the
    stored value depends on the lane and on them only through that column."""
    shape = store.buffer.shape
    width = shape[-1]
    if width % n:
        return None
    coefs, atoms = {}, []
    if linear_terms(store.indices[-1], 1, coefs, atoms) != 0 or atoms or coefs.get(lane) != 1:
        return None
    cols = {k: c for k, c in coefs.items() if k != lane and c}
    if any(expr_vars(i) & (set(cols) | {lane}) for i in store.indices[:-1]):
        return None
    step = n
    for name, c in sorted(cols.items(), key=lambda kv: kv[1]):
        lo_hi = ranges.get(name)
        if c != step or lo_hi is None or lo_hi[0] != 0:
            return None
        step = c * (lo_hi[1] + 1)
    if step != width:
        return None
    tied = set(cols) | {lane}
    for ld in collect_loads(store.value):
        const, lc, la = affine_form(ld.buffer.shape, ld.indices)
        lc = dict(lc)
        if any(expr_vars(e) & tied for _, e in la):
            return None
        a = lc.get(lane, 0)
        if any(lc.get(x, 0) != a * c for x, c in cols.items()):
            return None
    return tuple(sorted(cols))
