"""Streaming stores (``backends/llvm/streaming.py``): a loop annotated ``streaming_store``
writes with non-temporal stores where their address is a whole register, and the
register tile transpose moves its squares to the output's line starts whatever the
array's alignment. Every kernel is checked against numpy, with outputs placed at
every register offset, on the host and (on an AVX-512 host) an AVX2 target."""
from __future__ import annotations

import re

import numpy as np
import pytest

from explorer import Schedule, build, lower, ops, te
from explorer.backends.llvm.streaming import STREAMING
from explorer.errors import BuildError
from explorer.ir.functor import walk_stmt
from explorer.ir.stmt import For
from explorer.space import DesignSpace
from explorer.workload import Workload
from host_targets import host_and_avx2

TARGETS = host_and_avx2()
IDS = [f"{t.vector_lanes}lanes" for t in TARGETS]


def transpose_tiles(wl, lanes: int, tile: int, stream=1) -> Schedule:
    """The register transpose of the memory-bound rule: B's rows in squares of
    ``lanes`` (unrolled) under tiles of ``tile`` rows, its columns in vectors under
    tiles of ``tile`` columns, the row tiles parallel and annotated."""
    sch = Schedule(wl)
    b = sch.get_block(wl.func.params[-1].name)
    i, j = sch.get_loops(b)
    jo, jv = sch.split(j, [None, lanes])
    io, isq = sch.split(i, [None, lanes])
    io1, io2 = sch.split(io, [None, tile // lanes])
    jo1, jo2 = sch.split(jo, [None, tile // lanes])
    sch.reorder(io1, jo1, io2, jo2, isq, jv)
    sch.vectorize(jv)
    sch.unroll(isq)
    sch.parallel(io1)
    if stream is not None:
        sch.annotate(io1, STREAMING, stream)
    return sch


def placed(a: np.ndarray, offset: int) -> np.ndarray:
    """A copy of ``a`` starting ``offset`` elements past a 64-byte boundary."""
    buf = np.zeros(a.size + 64, a.dtype)
    start = (-buf.ctypes.data % 64) // a.itemsize + offset
    out = buf[start:start + a.size].reshape(a.shape)
    out[...] = a
    return out


def streamed(kernel) -> int:
    return len(re.findall(r"\bv?movnt\w+", kernel.assembly))


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("M,N,tile", [(64, 96, 32), (128, 64, 64)])
def test_streamed_transpose_at_every_output_offset(target, M, N, tile):
    """Output arrays at every float offset of a register (numpy's large arrays start
    16 bytes past a line): equal to numpy, stored with streaming stores."""
    lanes = target.vector_lanes
    wl = ops.transpose(M, N)
    kernel = build(transpose_tiles(wl, lanes, tile), target)
    assert streamed(kernel) > 0 and "sfence" in kernel.assembly
    assert "_streamed" in kernel.llvm_ir        # the squares moved to the line starts
    a = wl.make_args(seed=2)[0]
    for offset in range(lanes):
        out = placed(np.zeros((N, M), np.float32), offset)
        kernel(a, out)
        np.testing.assert_array_equal(out, a.T, err_msg=f"output {offset} floats past a line")


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_streaming_off_or_zero_keeps_ordinary_stores(target):
    lanes = target.vector_lanes
    wl = ops.transpose(64, 64)
    for stream in (None, 0):
        kernel = build(transpose_tiles(wl, lanes, 32, stream), target)
        assert streamed(kernel) == 0 and "sfence" not in kernel.assembly
        args = wl.make_args(seed=0)
        kernel(*args)
        wl.check(args)


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("M,N", [(67, 45), (40, 72)])
def test_streamed_transpose_with_tails(target, M, N):
    """Sizes the lanes do not divide: the squares do not cover the rows whole (no
    moved squares), guarded tails; equal to numpy at every offset."""
    lanes = target.vector_lanes
    wl = ops.transpose(M, N)
    sch = Schedule(wl)
    b = sch.get_block("B")
    i, j = sch.get_loops(b)
    jo, jv = sch.split(j, [None, lanes])
    io, isq = sch.split(i, [None, lanes])
    sch.reorder(io, jo, isq, jv)
    sch.vectorize(jv)
    sch.unroll(isq)
    sch.parallel(io)
    sch.annotate(io, STREAMING, 1)
    kernel = build(sch, target)
    a = wl.make_args(seed=1)[0]
    for offset in (0, 1, lanes // 2):
        out = placed(np.zeros((N, M), np.float32), offset)
        kernel(a, out)
        np.testing.assert_array_equal(out, a.T)


def transpose_plus(M: int, N: int) -> Workload:
    """B[i, j] = 2 * A[j, i] + C[i, j]: a contiguous read moves with the squares too."""
    A = te.placeholder((M, N), "float32", "A")
    C = te.placeholder((N, M), "float32", "C")
    B = te.compute((N, M), lambda i, j: A[j, i] * 2.0 + C[i, j], "B")
    return Workload.from_te([A, C, B], lambda a, c: (2 * a.T + c,), name=f"tplus_{M}x{N}")


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_streamed_transpose_inside_a_larger_expression(target):
    lanes = target.vector_lanes
    wl = transpose_plus(4 * lanes, 2 * lanes)
    kernel = build(transpose_tiles(wl, lanes, 2 * lanes), target)
    assert streamed(kernel) > 0
    a, c, _ = wl.make_args(seed=4)
    for offset in range(0, lanes, 3):
        out = placed(np.zeros((2 * lanes, 4 * lanes), np.float32), offset)
        kernel(a, c, out)
        np.testing.assert_allclose(out, 2 * a.T + c, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_streamed_elementwise_stores_where_aligned(target):
    """An ordinary vector loop: streaming stores where the address is a whole register
    at run time, ordinary ones otherwise; both equal numpy."""
    lanes = target.vector_lanes
    M, N = 16, 8 * lanes
    A = te.placeholder((M, N), "float32", "A")
    B = te.compute((M, N), lambda i, j: A[i, j] * 3.0, "B")
    wl = Workload.from_te([A, B], lambda a: (a * 3,), name="scale")
    sch = Schedule(wl)
    i, j = sch.get_loops(sch.get_block("B"))
    _, v = sch.split(j, [None, lanes])
    sch.vectorize(v)
    sch.parallel(i)
    sch.annotate(i, STREAMING, True)
    kernel = build(sch, target)
    assert "!nontemporal" in kernel.llvm_ir
    a = wl.make_args(seed=5)[0]
    for offset in (0, 4, lanes - 1):
        out = placed(np.zeros((M, N), np.float32), offset)
        kernel(a, out)
        np.testing.assert_array_equal(out, a * 3)


@pytest.mark.parametrize("value", [2, -1, 0.5, 1.0, "yes"])
def test_bad_annotation_values_are_refused(value):
    target = TARGETS[0]
    wl = ops.transpose(64, 64)
    with pytest.raises(BuildError, match="streaming_store.*0 or 1"):
        build(transpose_tiles(wl, target.vector_lanes, 32, value), target)


def test_annotation_on_a_vector_loop_is_refused():
    target = TARGETS[0]
    wl = ops.transpose(64, 64)
    sch = Schedule(wl)
    i, j = sch.get_loops(sch.get_block("B"))
    _, v = sch.split(j, [None, target.vector_lanes])
    sch.vectorize(v)
    sch.annotate(v, STREAMING, 1)
    with pytest.raises(BuildError, match="serial and parallel loops only"):
        build(sch, target)


@pytest.mark.parametrize("target", [t.with_(l1_bytes=4 * 1024) for t in TARGETS], ids=IDS)
def test_memory_bound_space_samples_streaming_register_transposes(target):
    """The rule offers streaming on the register transposes' parallel loop; sampled
    schedules with and without it equal numpy."""
    wl = ops.transpose(256, 192)
    seen = set()
    for sch in DesignSpace(wl, target).sample(24, seed=0):
        func = lower(sch)
        marks = [n.annotation(STREAMING) for n, _ in walk_stmt(func.body)
                 if isinstance(n, For) and n.annotation(STREAMING) is not None]
        if not marks:
            continue
        seen.add(marks[0])
        kernel = build(sch, target)
        args = wl.make_args(seed=1)
        kernel(*args)
        np.testing.assert_array_equal(args[1], args[0].T)
    assert seen == {0, 1}, f"sampled streaming values {seen}"
