"""Argument buffers for timing (``explorer.measure.buffers``): huge-page placement and
staggered offsets, used by every measured kernel's arguments."""
import mmap

import numpy as np
import pytest

from explorer import Schedule, build, ops
from explorer.measure.buffers import (HUGE_BYTES, LINE, argument_offsets, placed_copy,
                                      placed_empty, placed_full)
from explorer.measure.check import Reference


def _vm_flags(addr: int) -> list:
    """The VmFlags of the mapping holding ``addr`` (Linux), or None."""
    try:
        lines = open("/proc/self/smaps").read().splitlines()
    except OSError:
        return None
    inside = False
    for ln in lines:
        head = ln.split()[0] if ln else ""
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= addr < hi
        elif inside and ln.startswith("VmFlags:"):
            return ln.split()[1:]
    return None


def test_offsets_are_lines_apart_and_distinct_within_a_page():
    offs = argument_offsets(6)
    assert offs[0] == 0
    assert all(o % LINE == 0 and 0 <= o < mmap.PAGESIZE for o in offs)
    assert len(set(offs)) == 6


@pytest.mark.parametrize("offset", [0, 320, 4096 - 64])
def test_large_array_starts_offset_past_a_huge_page(offset):
    a = placed_full((1024, 1024), 2.5, np.float32, offset)
    assert a.ctypes.data % HUGE_BYTES == offset
    assert a.flags.c_contiguous and a.flags.writeable and a.dtype == np.float32
    assert (a == 2.5).all()
    if hasattr(mmap, "MADV_HUGEPAGE"):
        flags = _vm_flags(a.ctypes.data)
        if flags is not None:
            assert "hg" in flags   # MADV_HUGEPAGE is set on the array's mapping


def test_small_array_starts_offset_past_a_line_and_copies_exactly():
    src = np.arange(35, dtype=np.int64).reshape(5, 7)
    b = placed_copy(src, 640)
    assert b.ctypes.data % LINE == 640 % LINE
    np.testing.assert_array_equal(b, src)
    assert b.shape == (5, 7) and b.dtype == np.int64
    assert placed_empty((), np.float32).shape == ()


def test_offset_not_a_multiple_of_the_element_size_is_refused():
    with pytest.raises(ValueError, match="multiple of the element size 8"):
        placed_empty((4,), np.float64, 12)


def test_fresh_args_are_placed_apart_and_a_kernel_on_them_matches_numpy():
    wl = ops.get("softmax", M=1024, N=1024)
    ref = Reference(wl)
    args = ref.fresh_args()
    offs = argument_offsets(len(args))
    assert [a.ctypes.data % HUGE_BYTES for a in args] == offs
    assert all(a.flags.writeable for a in args)
    sch = Schedule(wl)
    kernel = build(sch, "llvm")
    kernel(*args)
    assert ref.compare(args) < 1e-5
    np.testing.assert_allclose(args[-1], wl.reference(*ref.inputs)[0], rtol=1e-5, atol=1e-6)
