"""Which block and thread compute each output element (``thread_map``, read from the
lowered program) against ownership worked out by hand from the schedule, and each
kernel's shared memory and registers against the limits (``gpu_usage``). Every
schedule is run in the interpreter (race-checked) and compared with numpy."""
from __future__ import annotations

import numpy as np
import pytest

from explorer import Schedule, Target, build, ops
from explorer.backends.cuda import nvcc, nvrtc
from explorer.backends.cuda.thread_map import thread_map
from explorer.errors import BuildError
from explorer.ir.tiling import tiling
from explorer.lower import lower
from explorer.space.gpu_usage import ESTIMATE, PTXAS, compiler_available, gpu_usage
from explorer.space import DesignSpace
from explorer.space.postprocs.verify_gpu import REGISTER_OVERHEAD
from test_cuda_codegen import SHAPES


def _checked(sch, wl) -> None:
    """Run in the race-checking interpreter and compare with numpy."""
    args = wl.make_args(seed=3)
    build(sch, "interp")(*args)
    assert wl.check(args) < 1e-3


def _block_thread_gemm(M=8, N=12, K=4):
    """C[i, j]: block (x = j // 4, y = i // 4), thread (x = j % 4, y = i % 4)."""
    wl = ops.gemm(M, N, K)
    sch = Schedule(wl)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i0, j0, i1, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    return wl, sch


def _vthread_local_gemm(M=16, N=32, K=8):
    """Block (x = j // 16, y = i // 8); vthread (i % 8) // 4; thread (j % 16) // 2;
    each thread keeps a 4x2 tile per vthread in registers and writes it back."""
    wl = ops.gemm(M, N, K)
    sch = Schedule(wl)
    C = sch.get_block("C")
    i, j, k = sch.get_loops(C)
    i0, i1, i2 = sch.split(i, [None, 2, 4])
    j0, j1, j2 = sch.split(j, [None, 8, 2])
    sch.reorder(i0, j0, i1, j1, i2, j2, k)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "vthread.x")
    sch.bind(j1, "threadIdx.x")
    cw = sch.cache_write(C, 0, "local")
    sch.reverse_compute_at(cw, j1)
    return wl, sch


def test_block_and_thread_of_every_element_of_a_small_gemm_match_the_hand_count():
    wl, sch = _block_thread_gemm()
    _checked(sch, wl)
    tm = thread_map(build(sch, "cuda"))
    assert (tm.buffer, tm.shape, tm.grid, tm.block) == ("C", (8, 12), (3, 2, 1), (4, 4, 1))
    for i in range(8):
        for j in range(12):
            bx, by, tx, ty = j // 4, i // 4, j % 4, i % 4
            assert tm.block_id[i, j] == bx + 3 * by, (i, j)
            assert tm.thread_id[i, j] == tx + 4 * ty, (i, j)
            assert tm.block_coords(int(tm.block_id[i, j])) == (bx, by, 0)
            assert tm.thread_coords(int(tm.thread_id[i, j])) == (tx, ty, 0)
    assert tm.unwritten == 0 and tm.shared == 0 and (tm.writers == 1).all()
    # block (2, 1) is the bottom-right 4x4 corner; its thread (1, 2) owns one element
    assert tm.thread_box(5) == ((4, 8), (8, 12))
    assert tm.thread_box(5, 1 + 4 * 2) == ((6, 9), (7, 10))
    assert tm.thread_box(6) is None


def test_vthreads_and_a_local_write_back_are_one_thread_each():
    wl, sch = _vthread_local_gemm()
    _checked(sch, wl)
    tm = thread_map(lower(sch.func))          # from the lowered function directly
    assert tm.grid == (2, 2, 1) and tm.block == (8, 1, 1)
    rows, cols = np.indices((16, 32))
    assert (tm.block_id == cols // 16 + 2 * (rows // 8)).all()
    assert (tm.thread_id == (cols % 16) // 2).all()
    assert (tm.vthread_id == (rows % 8) // 4).all()
    # one thread: two columns, both vthreads' 4 rows, so an 8x2 box of its block
    assert tm.thread_box(3, 5) == ((8, 26), (16, 28))
    assert len(tm.elements(3, 5)) == 16 and tm.shared == 0


def test_a_shape_that_does_not_divide_leaves_no_element_out_and_none_twice():
    wl = ops.gemm(10, 10, 4)
    sch = Schedule(wl)
    i, j, k = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, [None, 4])          # 3 blocks of 4 columns: the last one guarded
    sch.bind(i, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(j1, "threadIdx.x")
    _checked(sch, wl)
    tm = thread_map(build(sch, "cuda"))
    assert tm.grid == (3, 10, 1) and tm.unwritten == 0 and (tm.writers == 1).all()
    rows, cols = np.indices((10, 10))
    assert (tm.block_id == cols // 4 + 3 * rows).all() and (tm.thread_id == cols % 4).all()
    assert tm.thread_box(2 + 3 * 9) == ((9, 8), (10, 10))    # threads 2, 3 write nothing


def test_cooperative_shared_fetch_does_not_change_who_writes_the_output():
    wl, sch = _block_thread_gemm(8, 8, 8)
    C = sch.get_block("C")
    loops = sch.get_loops(C)
    A_sh = sch.cache_read(C, 0, "shared")
    sch.compute_at(A_sh, loops[1])
    fused = sch.fuse(*sch.get_loops(A_sh)[-2:])            # 4 rows x 8 of A: 32 elements
    _, ty, tx = sch.split(fused, [None, 4, 4])             # by the compute's 4x4 threads
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    _checked(sch, wl)
    kern = build(sch, "cuda")
    tm = thread_map(kern)
    rows, cols = np.indices((8, 8))
    assert (tm.block_id == cols // 4 + 2 * (rows // 4)).all()
    assert (tm.thread_id == cols % 4 + 4 * (rows % 4)).all() and tm.shared == 0
    # the shared tile: 4 rows of A (K = 8) per block, as the generated source declares
    assert kern.launches[0].static_shared_bytes == 4 * 8 * 4
    usage = gpu_usage(kern, "cuda", compile=False)
    assert usage.kernels[0].shared_bytes == 4 * 8 * 4


def test_unbound_program_and_unknown_buffer_say_what_to_do():
    wl = ops.gemm(8, 8, 4)
    with pytest.raises(BuildError, match="bind loops first"):
        thread_map(lower(Schedule(wl).func))
    _, sch = _block_thread_gemm()
    with pytest.raises(BuildError, match="no launch writes buffer 'D'.*launches write C"):
        thread_map(lower(sch.func), buffer="D")
    with pytest.raises(TypeError, match="lowered PrimFunc"):
        thread_map(sch)


def test_usage_estimate_counts_local_words_per_vthread():
    wl, sch = _vthread_local_gemm()
    usage = gpu_usage(sch, "cuda", compile=False)
    (k,) = usage.kernels
    # C_local is 4x2 floats, one copy per vthread (2): 16 words
    assert (k.source, k.registers, k.shared_bytes) == (ESTIMATE, 16 + REGISTER_OVERHEAD, 0)
    assert k.register_limit == 255 and k.shared_limit == 48 * 1024 and k.fits
    assert usage.estimated and "estimate" in usage.note and k.spill_bytes is None
    small = Target("cuda", max_registers_per_thread=24)
    assert not gpu_usage(sch, small, compile=False).kernels[0].fits


def test_usage_without_a_compiler_says_so(monkeypatch):
    _, sch = _block_thread_gemm()
    monkeypatch.setattr(nvcc, "find_nvcc", lambda: None)
    monkeypatch.setattr(nvrtc, "find_nvrtc", lambda: None)
    usage = gpu_usage(sch, "cuda")
    assert usage.kernels[0].source == ESTIMATE
    assert "nvcc (and NVRTC) not found" in usage.note


def test_usage_on_a_cpu_target_is_refused():
    _, sch = _block_thread_gemm()
    with pytest.raises(BuildError, match="not a cuda target"):
        gpu_usage(sch, "llvm")


@pytest.mark.skipif(not compiler_available(), reason="no nvcc or NVRTC to ask ptxas")
def test_usage_from_ptxas_and_a_register_limit_it_breaks():
    wl, sch = _vthread_local_gemm()
    usage = gpu_usage(sch, "cuda -arch=sm_80")
    (k,) = usage.kernels
    assert k.source == PTXAS and 0 < k.registers <= 255 and k.spill_bytes == 0
    assert k.problem is None and not usage.estimated
    tight = Target("cuda", max_registers_per_thread=8)
    (k,) = gpu_usage(sch, tight).kernels
    assert k.source == PTXAS and "registers per thread exceed the limit of 8" in k.problem


CROSS_THREAD = {"row_sum"}          # its sampled schedules may reduce across threads


@pytest.mark.parametrize("op", sorted(SHAPES))
def test_sampled_schedules_of_every_operator_write_each_output_element(op):
    wl = ops.get(op, **SHAPES[op])
    (sch,) = DesignSpace(wl, "cuda", max_tries=2000).sample(1, seed=11)
    _checked(sch, wl)
    kernel = build(sch, "cuda")
    tm = thread_map(kernel)
    assert tm.buffer == wl.func.params[-1].name and tm.launch == len(kernel.launches) - 1
    assert tm.shape == tuple(wl.func.params[-1].shape) and tm.unwritten == 0
    assert (tm.block_id < tm.num_blocks).all() and (tm.thread_id < tm.threads_per_block).all()
    if op not in CROSS_THREAD:
        assert tm.shared == 0


@pytest.mark.parametrize("make", [_block_thread_gemm, _vthread_local_gemm])
def test_the_tiling_pictures_gpu_tiles_match_the_generated_code(make):
    """The tiling picture (from the schedule) and the thread map (from the lowered
    program the CUDA C is generated from) cut the output into the same block and
    thread tiles."""
    wl, sch = make()
    _checked(sch, wl)
    levels = {lv.name: lv for lv in tiling(sch.func, "C").levels}
    tm = thread_map(build(sch, "cuda"))

    def box(mask):
        idx = np.argwhere(mask)
        (r0, c0), (r1, c1) = idx.min(0), idx.max(0) + 1
        return (int(r0), int(c0), int(r1 - r0), int(c1 - c0))
    blocks = {box(tm.block_id == b) for b in range(tm.num_blocks)}
    assert blocks == set(levels["block"].rects)
    first = (tm.block_id == 0) & (tm.vthread_id == 0)     # the picture's first tile
    threads = {box(first & (tm.thread_id == t)) for t in range(tm.threads_per_block)}
    assert threads == set(levels["thread"].rects)
