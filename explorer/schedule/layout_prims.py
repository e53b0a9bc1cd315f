"""transform_layout: store an intermediate buffer in another layout.

A cache stage copies a buffer in its own dimension order; the order in which a
kernel walks it may differ. Two kinds of index map change that layout:

- a permutation of the dimensions, so the loop that is vectorized walks the
  copy's last dimension (channel-last, done by a schedule instead of by
  changing the operator)::

    W_global[k, c, r, s]  --transform_layout(conv, ("read", 1), [1, 2, 3, 0])-->
    W_global[c, r, s, k]       (every access rewritten, nothing else changes)

- blocking: ``factors`` splits dimension ``d`` into ``d // f`` (outer) and
  ``d % f`` (inner), numbered in place, and ``axes`` permutes the split
  dimensions. The packed panels of a GEMM (BLIS) and the NCHW[x]c blocking of
  convolutions are such maps::

    B[k, n]        factors [None, 16]       -> dims (k, n//16, n%16)
                   axes [1, 0, 2]           -> B_p[n // 16, k, n % 16]
    W[k, c, r, s]  factors [8, 4, None, None] -> dims (k//8, k%8, c//4, c%4, r, s)
                   axes [0, 2, 4, 5, 3, 1]  -> W_p[k // 8, c // 4, r, s, c % 4, k % 8]
    I[n, c, h, w]  factors [None, 16, None, None], axes [0, 1, 3, 4, 2]
                                            -> I_p[n, c // 16, h, w, c % 16]

  A factor that does not divide its dimension pads the allocated buffer (the
  outer extent is rounded up); every access stays in bounds because an index
  ``i < E`` maps to ``i // f < ceil(E / f)``; the padding is never read.

Only buffers the function allocates (the copies made by cache_read / cache_write)
can change: a parameter's layout belongs to the caller. The copy that fills the
new layout is part of the function, so its cost is inside whatever the function
measures. Lowering compacts the new buffer dimension by dimension as before.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.arith import simplify
from ..ir.expr import BufferLoad, FloorDiv, FloorMod, const
from ..ir.functor import replace_loads, transform_stmt
from ..ir.stmt import BlockRealize, BufferStore
from .tree import find_block


def _pick_buffer(block, which, prim: str):
    if not isinstance(which, (tuple, list)) or len(which) != 2 or which[0] not in ("read",
                                                                                   "write"):
        raise ScheduleError(f"{prim}: buffer must be ('read', i) or ('write', 0), not "
                            f"{which!r}")
    kind, idx = which
    if kind == "write":
        if idx != 0:
            raise ScheduleError(f"{prim}: block {block.name!r} writes one buffer; use "
                                f"('write', 0), not {which!r}")
        return block.body.buffer
    reads = block.reads()
    if not isinstance(idx, int) or not 0 <= idx < len(reads):
        raise ScheduleError(f"{prim}: block {block.name!r} reads {len(reads)} buffer(s) "
                            f"({', '.join(b.name for b in reads)}); read index {idx!r} is "
                            "out of range")
    return reads[idx]




def _split_space(buf, factors, prim: str) -> list:
    """The dimensions of ``buf`` after blocking by ``factors``: ``(old dim, kind, factor,
    extent)`` with kind "whole", "outer" or "inner"."""
    if factors is None:
        factors = [None] * buf.ndim
    if not isinstance(factors, (list, tuple)) or len(factors) != buf.ndim:
        raise ScheduleError(f"{prim}: factors must be a list of {buf.ndim} entries for "
                            f"{buf.name} {list(buf.shape)} (None keeps a dimension whole, an "
                            f"int f >= 1 splits it into d // f and d % f), not {factors!r}")
    space = []
    for d, (f, extent) in enumerate(zip(factors, buf.shape)):
        if f is None:
            space.append((d, "whole", None, extent))
            continue
        if not isinstance(f, int) or isinstance(f, bool) or f <= 0:
            raise ScheduleError(f"{prim}: the factor of dimension {d} of {buf.name} "
                                f"{list(buf.shape)} must be an int >= 1 or None, not {f!r}")
        space.append((d, "outer", f, -(-extent // f)))
        space.append((d, "inner", f, min(f, extent)))
    return space


def transform_layout(func, block: str, which, axes, factors=None):
    """``func`` with the buffer ``which`` of ``block`` stored in a new layout: dimension
    ``d`` split into ``d // factors[d]`` and ``d % factors[d]`` where ``factors[d]`` is
    not None (no factors: none split), then the resulting dimensions permuted (new
    dimension n is split dimension ``axes[n]``)."""
    prim = "transform_layout"
    r, _ = find_block(func, block, prim)
    buf = _pick_buffer(r.block, which, prim)
    if buf not in func.alloc_buffers:
        raise ScheduleError(f"{prim}: {buf.name} is a parameter of {func.name!r}; its layout "
                            "is the caller's. Copy it first (cache_read / cache_write) and "
                            "transform the copy")
    space = _split_space(buf, factors, prim)
    axes = list(axes) if isinstance(axes, (list, tuple)) else axes
    if (not isinstance(axes, list) or not all(isinstance(a, int) for a in axes)
            or sorted(axes) != list(range(len(space)))):
        split = "" if len(space) == buf.ndim else \
            f" (its {len(space)} dimensions after splitting by {list(factors)})"
        raise ScheduleError(f"{prim}: axes must be a permutation of 0..{len(space) - 1} for "
                            f"{buf.name} {list(buf.shape)}{split}, not {axes!r}")
    new_buf = buf.with_(shape=tuple(space[a][3] for a in axes))

    def one(idx, entry):
        d, kind, f, _ = entry
        if kind == "whole":
            return idx[d]
        op = FloorDiv if kind == "outer" else FloorMod
        return simplify(op(idx[d], const(f)))

    def perm(idx):
        return tuple(one(idx, space[a]) for a in axes)

    def loads(e):
        return replace_loads(e, lambda ld: BufferLoad(new_buf, perm(ld.indices))
                             if ld.buffer == buf else None)

    def store(st):
        if st is None:
            return None
        if st.buffer == buf:
            return BufferStore(new_buf, loads(st.value), perm(st.indices))
        return BufferStore(st.buffer, loads(st.value), st.indices)

    def fn(s):
        if isinstance(s, BlockRealize):
            b = s.block
            return s.with_(block=b.with_(body=store(b.body), init=store(b.init)))
        return None

    body = transform_stmt(func.body, fn)
    allocs = tuple(new_buf if b == buf else b for b in func.alloc_buffers)
    return func.with_(body=body, alloc_buffers=allocs)
