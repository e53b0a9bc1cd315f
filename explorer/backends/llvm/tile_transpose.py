"""Register tile transpose: an unrolled square tile of a transposed read, in shuffles.

A transpose vectorized along its write gathers its read: each lane of
``B[i0 + u, j0 + v] = A[j0 + v, i0 + u]`` (``v`` the vector lane) reads another row
of ``A``, one ``vgatherdps`` per vector, about 3 cycles an element on Zen 5 where a
copy costs 0.4. When the loop around the vector loop is unrolled and as long as
the vector (``u`` and ``v`` both ``n`` long, one register of ``n`` lanes), the
tile's reads are ``n`` contiguous rows of ``A`` instead: this module loads them
as ``n`` vectors (lane = ``u``), transposes them in registers with ``n log2 n``
two-source shuffles (``transpose_rows``), and emits the unrolled stores with the
read replaced by the ``u``-th column::

    for u in unrolled(n):            rows[k] = A[j0 + k, i0 : i0 + n]     (k < n)
      for v in vectorized(n):   ->   cols    = transpose_rows(rows)
        B[i0+u, j0+v] = A[j0+v, i0+u]  B[i0 + u, j0 : j0 + n] = cols[u]     (u < n)

The tile reads and writes exactly the elements the loops did, so bounds are as
safe as before. A read that is transposed (lane coefficient along ``v`` not 0 or
1, and 1 along ``u``) is replaced; every other part of the stored value is
emitted as usual. Anything else (a guard, a lane mask, a tile that is not one
register square, several statements) is left to the ordinary emitter.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...ir.expr import BufferLoad
from ...ir.functor import collect_loads
from ...ir.stmt import BufferStore, For
from .analysis import flat_coeff, has_unsafe, vectorize_blocker
from .exprgen import ExprEmitter
from . import streaming
from .types import ELEM_BYTES, I32, I64, VOID, const_int, suffix, vector_const


def transpose_rows(b: ir.IRBuilder, rows: list) -> list:
    """The columns of an n x n tile held as ``n`` vectors of ``n`` lanes (n a power of
    two): ``out[j][k] == rows[k][j]``. log2(n) stages; stage ``s`` swaps bit ``s`` of
    the row index with bit ``s`` of the lane (the off-diagonal s x s blocks of every
    2s x 2s block trade places), each output one shuffle of two inputs."""
    n = len(rows)
    out = list(rows)
    s = 1
    while s < n:
        nxt = list(out)
        for i in range(n):
            if i & s:
                continue
            lo = [k if not k & s else n + k - s for k in range(n)]
            hi = [k + s if not k & s else n + k for k in range(n)]
            nxt[i] = b.shuffle_vector(out[i], out[i + s], vector_const(I32, tuple(lo)))
            nxt[i + s] = b.shuffle_vector(out[i], out[i + s], vector_const(I32, tuple(hi)))
        out, s = nxt, 2 * s
    return out


class _ColumnEmitter(ExprEmitter):
    """An emitter that answers the tile's transposed reads with precomputed columns."""

    def __init__(self, fn, lane: str, lanes: int, columns: dict):
        super().__init__(fn, lane=lane, lanes=lanes)
        self.columns = columns

    def emit(self, e, mask=None):
        if type(e) is BufferLoad:
            col = self.columns.get(e)
            if col is not None:
                return col
        return super().emit(e, mask)


def tile_of(gen, s: For):
    """(vector loop, store, transposed reads) when unrolled loop ``s`` is such a tile,
    else None (memoized per loop: it depends on the loop and the target only)."""
    inner = s.body
    if (s.kind != "unrolled" or not isinstance(inner, For)
            or inner.kind != "vectorized" or inner.extent != s.extent
            or not isinstance(inner.body, BufferStore)):
        return None
    n, store = s.extent, inner.body
    if n < 2 or n & (n - 1) or gen.st.mod.memo("blocker", inner,
                                              lambda: vectorize_blocker(inner)) is not None:
        return None
    u, v = s.var.name, inner.var.name
    if flat_coeff(store.buffer.shape, store.indices, v) != 1:
        return None
    reads = []
    for ld in collect_loads(store.value):
        if ld in reads:
            continue
        if (flat_coeff(ld.buffer.shape, ld.indices, v) not in (None, 0, 1)
                and flat_coeff(ld.buffer.shape, ld.indices, u) == 1):
            if any(has_unsafe(i) for i in ld.indices) or ld.buffer.name == store.buffer.name:
                return None     # the rows are read before any store: no reading our own
            if n * ELEM_BYTES[ld.buffer.dtype] * 8 > max(gen.st.mod.target.vector_bits, 128):
                return None     # a row wider than one register
            reads.append(ld)
    return (inner, store, reads) if reads else None


def try_emit(gen, s: For) -> bool:
    """Emit unrolled loop ``s`` as a register tile transpose when it is one (see the
    module docstring); False (nothing emitted) otherwise. Under a ``streaming_store``
    loop, a tile whose row the squares cover whole (``streaming.square_columns``)
    writes with streaming stores, shifted to whole registers (see ``_emit_streaming``)."""
    if gen.mask is not None:        # under a lane mask: the ordinary emitter's masked forms
        return False
    tile = gen.st.mod.memo("tile transpose", s, lambda: tile_of(gen, s))
    if tile is None:
        return False
    inner, store, reads = tile
    gen.st.mod.vectorized_loops[inner.var.name] = "vector"
    if gen.streaming and store.buffer.name in gen.st.mod.param_names:
        cols = gen.st.mod.memo("streaming columns", s, lambda: streaming.square_columns(
            store, inner.var.name, s.extent, gen.st.ranges))
        if cols is not None:
            _emit_streaming(gen, s, tile, cols)
            return True
    _emit_square(gen, s, tile, ir.Constant(I64, 0), nontemporal=False)
    return True


def _emit_square(gen, s: For, tile, first: ir.Value, nontemporal: bool, mask=None,
                 rows_at=None) -> None:
    """The square with its vector lanes starting at ``first`` (an i64: 0, or a shift
    to a whole register), loads, shuffles and stores (of the lanes in ``mask``).
    ``rows_at``: the vector variable's value for each of the ``n`` rows read (default
    ``first + k``; a row edge reads a valid row for the lanes it masks off)."""
    inner, store, _ = tile
    n, u, v = s.extent, s.var.name, inner.var.name
    columns = _square_columns(gen, s, tile, first, rows_at)
    for j in range(n):
        ex = _ColumnEmitter(gen.st, v, n, {ld: cols[j] for ld, cols in columns.items()})
        saved, gen.mask = gen.mask, mask
        try:
            gen.with_var(u, ir.Constant(I64, j), lambda: gen.with_var(
                v, first, lambda: gen.store(store, ex, nontemporal=nontemporal)))
        finally:
            gen.mask = saved


def _square_columns(gen, s: For, tile, first: ir.Value, rows_at=None) -> dict:
    """{transposed read: its ``n`` columns} of the square whose vector lanes start at
    ``first`` (rows read at ``rows_at``, see ``_emit_square``)."""
    inner, store, reads = tile
    n, u, v = s.extent, s.var.name, inner.var.name
    columns = {ld: [] for ld in reads}
    row_ex = ExprEmitter(gen.st, lane=u, lanes=n)
    for ld in reads:
        rows = []
        for k in range(n):
            at = rows_at[k] if rows_at is not None else ir.Constant(I64, k) \
                if const_int(first) == 0 else gen.b.add(first, ir.Constant(I64, k),
                                                        flags=("nsw",))
            gen.with_var(u, ir.Constant(I64, 0), lambda: gen.with_var(
                v, at, lambda: rows.append(row_ex.emit(ld))))
        columns[ld] = transpose_rows(gen.b, rows)
    return columns


def _emit_streaming(gen, s: For, tile, cols: tuple) -> None:
    """The square with streaming stores. Its row of the output need not start at a
    whole register (numpy's large arrays start 16 bytes past one), so every square
    is moved ``e`` lanes right, to where the output's lines begin, reading the rows
    of the input that those columns need: the squares then store whole aligned
    lines. The last square of a row (which would run past it) stores the lanes past
    the moved squares, and the row's first square the ``e`` lanes before them, with
    ordinary masked stores, each into the one line those lanes lie in (the loads of
    the lanes masked off read a row inside the input); an output whose start is not a whole element
    keeps ordinary stores everywhere. ``cols``: the loop variables of the square's
    column (their values 0 give the row's first square)."""
    inner, store, _ = tile
    n, b = s.extent, gen.b
    width = store.buffer.shape[-1]
    size = ELEM_BYTES[store.buffer.dtype]
    addr = b.ptrtoint(gen.st.buffer_ptr(store.buffer), I64)
    whole = b.icmp_unsigned("==", b.and_(addr, ir.Constant(I64, size - 1)),
                            ir.Constant(I64, 0))
    elems = b.lshr(addr, ir.Constant(I64, size.bit_length() - 1))
    shift = b.and_(b.sub(ir.Constant(I64, 0), elems), ir.Constant(I64, n - 1))
    column = ExprEmitter(gen.st)
    first_col = None

    def col():
        nonlocal first_col
        first_col = column.sext64(column.emit_index(store.indices[-1]))
    gen.with_var(inner.var.name, ir.Constant(I64, 0), col)
    fits = b.icmp_signed("<=", b.add(b.add(first_col, shift), ir.Constant(I64, n)),
                         ir.Constant(I64, width))
    whole_bb = b.append_basic_block(f"{s.var.name}_whole_elements")
    moved_bb = b.append_basic_block(f"{s.var.name}_streamed")
    edge_bb = b.append_basic_block(f"{s.var.name}_row_edge")
    plain_bb = b.append_basic_block(f"{s.var.name}_unaligned")
    done_bb = b.append_basic_block(f"{s.var.name}_square_done")
    b.cbranch(whole, whole_bb, plain_bb)
    b.position_at_end(whole_bb)
    b.cbranch(fits, moved_bb, edge_bb)
    b.position_at_end(moved_bb)
    _emit_square(gen, s, tile, shift, nontemporal=True)
    b.branch(done_bb)
    # the row's last square stores the lanes past the moved ones, its first square the
    # lanes before them: no line is written both streaming and cached (a cached line
    # that a streaming store then writes is flushed, slow). Each of the two is stored
    # into its own line only, aligned, the other lanes masked off: a masked store that
    # straddles into a streamed line cost a quarter of the 1024 x 1024 transpose's time
    b.position_at_end(edge_bb)
    vt = ir.VectorType(I64, n)
    iota = ir.Constant(vt, list(range(n)))
    rest = b.sub(ir.Constant(I64, n), shift)        # lanes of the row's tail: n - shift
    rest_v = b.shuffle_vector(b.insert_element(ir.Constant(vt, None), rest,
                                               ir.Constant(I32, 0)),
                              ir.Constant(vt, None), vector_const(I32, (0,) * n))
    last = ir.Constant(I64, n - 1)
    tail_rows = []
    for k in range(n):      # the tail's line starts ``shift`` lanes into the last square
        at = b.add(shift, ir.Constant(I64, k), flags=("nsw",))
        tail_rows.append(b.select(b.icmp_signed("<=", at, last), at, last))
    head_first = b.sub(shift, ir.Constant(I64, n))  # the head's line starts n - shift before
    zero = ir.Constant(I64, 0)
    head_rows = []
    for k in range(n):
        at = b.add(head_first, ir.Constant(I64, k), flags=("nsw",))
        head_rows.append(b.select(b.icmp_signed(">=", at, zero), at, zero))
    head_mask = b.icmp_unsigned(">=", iota, rest_v)
    if _blend_edges(gen, s, tile, cols, shift, head_first, tail_rows, head_rows,
                    b.icmp_unsigned("<", iota, rest_v), head_mask):
        b.branch(done_bb)
        b.position_at_end(plain_bb)
        _emit_square(gen, s, tile, ir.Constant(I64, 0), nontemporal=False)
        b.branch(done_bb)
        b.position_at_end(done_bb)
        return

    _emit_square(gen, s, tile, shift, nontemporal=False,
                 mask=b.icmp_unsigned("<", iota, rest_v), rows_at=tail_rows)

    def head(names):
        if not names:
            _emit_square(gen, s, tile, head_first, nontemporal=False, mask=head_mask,
                         rows_at=head_rows)
            return
        gen.with_var(names[0], ir.Constant(I64, 0), lambda: head(names[1:]))
    head(list(cols))
    b.branch(done_bb)
    b.position_at_end(plain_bb)
    _emit_square(gen, s, tile, ir.Constant(I64, 0), nontemporal=False)
    b.branch(done_bb)
    b.position_at_end(done_bb)


def _blend_edges(gen, s: For, tile, cols: tuple, shift, head_first, tail_rows, head_rows,
                 tail_mask, head_mask) -> bool:
    """The row edges of a square whose output rows follow each other in memory (a row's
    tail and the next row's head share one line) and whose stored value is the
    transposed read itself: each such line is the tail's lanes and the next row's
    head's, blended and written with one streaming store; only the square's first
    head and last tail (lines shared with the squares above and below) are masked
    ordinary stores. False (nothing emitted) when the square is not of that form."""
    inner, store, reads = tile
    n, u, v, b = s.extent, s.var.name, inner.var.name, gen.b
    if (len(reads) != 1 or store.value != reads[0]
            or reads[0].buffer.dtype != store.buffer.dtype
            or flat_coeff(store.buffer.shape, store.indices, u) != store.buffer.shape[-1]):
        return False
    ld = reads[0]
    tail = _square_columns(gen, s, tile, shift, tail_rows)[ld]
    ex = ExprEmitter(gen.st, lane=v, lanes=n)
    ptr = gen.st.buffer_ptr(store.buffer)

    def addr(row: int, first):
        out = []
        gen.with_var(u, ir.Constant(I64, row), lambda: gen.with_var(
            v, first, lambda: out.append(ex.gep(ptr, store, lane0=True, inbounds=False))))
        return out[0]
    found = []

    def at_row_start(names):        # the row's first square: its column variables 0
        if not names:
            found.extend((_square_columns(gen, s, tile, head_first, head_rows)[ld],
                          addr(0, head_first)))
            return
        gen.with_var(names[0], ir.Constant(I64, 0), lambda: at_row_start(names[1:]))
    at_row_start(list(cols))
    head, head_at = found
    for j in range(n - 1):
        line = b.select(tail_mask, tail[j], head[j + 1])
        streaming.store(gen, line, addr(j, shift), store.buffer.dtype, n)
    saved, gen.mask = gen.mask, None
    try:
        for value, at, mask in ((tail[n - 1], addr(n - 1, shift), tail_mask),
                                (head[0], head_at, head_mask)):
            fn = gen.st.mod.declare(f"llvm.masked.store.{suffix(value.type)}.p0", VOID,
                                    [value.type, at.type, I32, mask.type])
            b.call(fn, [value, at, ir.Constant(I32, ELEM_BYTES[store.buffer.dtype]), mask])
    finally:
        gen.mask = saved
    return True
