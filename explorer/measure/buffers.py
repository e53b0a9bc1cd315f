"""Argument buffers for timing: line-aligned, large arrays on huge pages, staggered.

A memory-bound kernel's time depended on where its arrays happened to land. numpy puts
an array of 4 MiB or more 16 bytes past a page: every 64-byte vector load of a row
straddles two cache lines, which costs a kernel that reads each row more than once
(softmax) and not a copy. And only the 2 MiB pages wholly inside such an array are
huge (THP ``madvise``); the rest is 4 KiB pages whose physical addresses change with
every allocation. Measured in one process, two threads, the tuned kernel over fresh
allocations (2-core Intel Xeon, AVX-512, 2026-12-02): softmax 1024 x 1024 154-178 us
(79-92% of copy) with numpy's placement, 142-146 us (96-99%) 64 bytes aligned;
softmax 4096 x 1024 603-635 us (91-95%) with numpy's, 670-731 us (79-87%) aligned on
4 KiB pages only, 594-599 us on huge pages, 571-574 us (99%) on huge pages with the
arguments staggered. Transposes ran alike at every placement tried.

``placed_empty`` gives an array of ``HUGE_BYTES`` or more a mapping of its own, starts
it ``offset`` bytes past a 2 MiB boundary and asks for huge pages (``MADV_HUGEPAGE``),
so every allocation is laid out alike; a smaller one starts ``offset`` bytes past a
cache line. ``argument_offsets`` staggers the arguments of one call within the page, so
that an input and an output element of the same index do not share their low 12
address bits (4K aliasing: a load waits on an unrelated earlier store). Every timed
kernel gets its arguments from here (``check.Reference.fresh_args``): our candidates,
the copy reference and the numpy and PyTorch baselines alike (PyTorch's tensors share
those arrays; what a library allocates inside is its own).
"""
from __future__ import annotations

import mmap

import numpy as np

HUGE_BYTES = 2 << 20
LINE = 64
STAGGER = 5 * LINE   # between consecutive arguments' offsets: apart in the page and in L1 sets


def argument_offsets(count: int) -> list:
    """Byte offset past a huge page (hence past a 4 KiB page) of each of ``count``
    arguments: 0, 320, 640... (multiples of the cache line, wrapped within a page)."""
    return [(k * STAGGER) % mmap.PAGESIZE for k in range(count)]


def placed_empty(shape, dtype, offset: int = 0) -> np.ndarray:
    """An uninitialized C-contiguous array whose data start ``offset`` bytes past a
    2 MiB boundary and lie on huge pages where the host gives them (arrays of at
    least ``HUGE_BYTES``); smaller ones come from numpy, ``offset`` bytes past a
    cache line."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * dtype.itemsize
    if offset < 0 or offset % dtype.itemsize:
        raise ValueError(f"offset {offset} must be a non-negative multiple of the element "
                         f"size {dtype.itemsize}")
    if nbytes < HUGE_BYTES or not hasattr(mmap, "MADV_HUGEPAGE"):
        raw = np.empty(nbytes + offset + LINE, dtype=np.uint8)
        skip = (-raw.ctypes.data) % LINE + offset
        return raw[skip:skip + nbytes].view(dtype).reshape(shape)
    size = nbytes + offset + HUGE_BYTES
    size += (-size) % HUGE_BYTES
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    raw = np.frombuffer(m, dtype=np.uint8)
    skip = (-raw.ctypes.data) % HUGE_BYTES
    m.madvise(mmap.MADV_HUGEPAGE, skip, size - skip - (size - skip) % HUGE_BYTES)
    return raw[skip + offset:skip + offset + nbytes].view(dtype).reshape(shape)


def placed_copy(a: np.ndarray, offset: int = 0) -> np.ndarray:
    """A writable copy of ``a`` in a ``placed_empty`` buffer."""
    out = placed_empty(a.shape, a.dtype, offset)
    np.copyto(out, a)
    return out


def placed_full(shape, fill, dtype, offset: int = 0) -> np.ndarray:
    """A ``placed_empty`` buffer filled with ``fill``."""
    out = placed_empty(shape, dtype, offset)
    out.fill(fill)
    return out
