"""Register tile transpose (``backends/llvm/tile_transpose.py``): an unrolled loop of as
many rows as the vector loop inside it has lanes, over a transposed read, is emitted as
contiguous row loads, shuffles and contiguous stores instead of gathers. Every kernel is
checked against numpy, for the host and (on an AVX-512 host) an AVX2 target, with the
tile's lanes read from the target."""
from __future__ import annotations

import pytest

from explorer import Schedule, ops, te
from explorer.space import DesignSpace
from explorer.workload import Workload
from host_targets import host_and_avx2
from test_llvm_gather import run_checked

TARGETS = host_and_avx2()
IDS = [f"{t.vector_lanes}lanes" for t in TARGETS]


def tiled(wl, rows: int, lanes: int, unroll: bool = True) -> Schedule:
    """B's column loop in vectors of ``lanes``, its row loop split by ``rows`` with that
    part right outside the vector loop (unrolled unless ``unroll`` is False)."""
    sch = Schedule(wl)
    b = sch.get_block(wl.func.params[-1].name)
    r, c = sch.get_loops(b)
    co, cv = sch.split(c, [None, lanes])
    ro, ru = sch.split(r, [None, rows])
    sch.reorder(ro, co, ru, cv)
    if unroll:
        sch.unroll(ru)
    sch.vectorize(cv)
    sch.parallel(ro)
    return sch


def transpose_plus(M: int, N: int) -> Workload:
    """B[i, j] = 2 * A[j, i] + C[i, j]: a transposed read next to a contiguous one."""
    A = te.placeholder((M, N), "float32", "A")
    C = te.placeholder((N, M), "float32", "C")
    B = te.compute((N, M), lambda i, j: A[j, i] * 2.0 + C[i, j], "B")
    return Workload.from_te([A, C, B], lambda a, c: (2 * a.T + c,), name=f"tplus_{M}x{N}")


def gathers(kernel) -> int:
    return kernel.llvm_ir.count("llvm.masked.gather")


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("M,N", [(64, 96), (67, 45), (128, 32)])
def test_square_tile_is_shuffled_not_gathered(target, M, N):
    """Sizes that the lanes do not divide keep a guarded tail (gathers under masks); the
    interior tiles are transposed in registers."""
    lanes = target.vector_lanes
    wl = ops.transpose(M, N)
    kernel = run_checked(wl, tiled(wl, lanes, lanes), target)
    ir_text = kernel.llvm_ir
    n_stages = lanes.bit_length() - 1
    assert ir_text.count("shufflevector") >= lanes * n_stages
    if M % lanes == 0 and N % lanes == 0:
        assert gathers(kernel) == 0


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_transposed_read_inside_a_larger_expression(target):
    lanes = target.vector_lanes
    wl = transpose_plus(2 * lanes, 3 * lanes)
    kernel = run_checked(wl, tiled(wl, lanes, lanes), target)
    assert gathers(kernel) == 0 and "shufflevector" in kernel.llvm_ir


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_tiles_that_are_not_one_register_square_keep_their_gathers(target):
    """Half as many rows as lanes, or the rows not unrolled: the ordinary emitter."""
    lanes = target.vector_lanes
    wl = ops.transpose(4 * lanes, 2 * lanes)
    for sch in (tiled(wl, lanes // 2, lanes), tiled(wl, lanes, lanes, unroll=False)):
        assert gathers(run_checked(wl, sch, target)) > 0


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_memory_bound_space_offers_the_register_tile(target):
    """MemoryBoundTiling's ``register`` sketch reaches the backend's shuffle transpose."""
    space = DesignSpace(ops.transpose(256, 192), target.with_(l1_bytes=4 * 1024))
    shuffled = 0
    for sch in space.sample(8, seed=0):
        kernel = run_checked(space.workload, sch, target)
        if gathers(kernel) == 0 and "shufflevector" in kernel.llvm_ir:
            shuffled += 1
    assert shuffled, space.summary()


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_other_element_types(target, dtype):
    """An 8x8 tile: shuffled where a row of 8 elements fits one register (int32 on AVX2
    and up, float64 on AVX-512), gathered otherwise; right either way."""
    wl = ops.transpose(64, 48, dtype=dtype)
    kernel = run_checked(wl, tiled(wl, 8, 8), target)
    fits = 8 * {"float64": 64, "int32": 32}[dtype] <= target.vector_bits
    assert (gathers(kernel) == 0) == fits
