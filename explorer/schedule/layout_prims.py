"""transform_layout: permute the dimensions of an intermediate buffer.

A cache stage copies a buffer in its own dimension order; the order in which a
kernel walks it may differ. Permuting the copy's dimensions makes the loop that
is vectorized walk its last dimension, so its loads and stores are contiguous
(the NCHW[x]c packing of convolution kernels, done by a schedule instead of by
changing the operator)::

    W_global[k, c, r, s]  --transform_layout(conv, ("read", 1), [1, 2, 3, 0])-->
    W_global[c, r, s, k]       (every access rewritten, nothing else changes)

Only buffers the function allocates (the copies made by cache_read / cache_write)
can change: a parameter's layout belongs to the caller. Lowering compacts the
permuted buffer dimension by dimension as before.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.expr import BufferLoad
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


def transform_layout(func, block: str, which, axes):
    """``func`` with the buffer ``which`` of ``block`` stored with its dimensions in the
    order ``axes`` (new dimension d is old dimension ``axes[d]``)."""
    prim = "transform_layout"
    r, _ = find_block(func, block, prim)
    buf = _pick_buffer(r.block, which, prim)
    if buf not in func.alloc_buffers:
        raise ScheduleError(f"{prim}: {buf.name} is a parameter of {func.name!r}; its layout "
                            "is the caller's. Copy it first (cache_read / cache_write) and "
                            "transform the copy")
    axes = list(axes) if isinstance(axes, (list, tuple)) else axes
    if (not isinstance(axes, list) or sorted(axes) != list(range(buf.ndim))
            or not all(isinstance(a, int) for a in axes)):
        raise ScheduleError(f"{prim}: axes must be a permutation of 0..{buf.ndim - 1} for "
                            f"{buf.name} {list(buf.shape)}, not {axes!r}")
    new_buf = buf.with_(shape=tuple(buf.shape[a] for a in axes))

    def perm(idx):
        return tuple(idx[a] for a in axes)

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
