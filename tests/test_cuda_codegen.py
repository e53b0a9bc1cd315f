"""CUDA C generation (``explorer.backends.cuda.codegen``): the source a GPU would run.

Every schedule here is built for cuda, compiled with nvcc where it is installed, run
through the host emulator (the same source compiled as C++) and compared with numpy,
and run on the interpreter, whose race check follows the same execution model.
"""
import pathlib
import re

import numpy as np
import pytest

from explorer import Schedule, Target, build, lower, ops
from explorer.backends.barriers import barrier_points
from explorer.errors import BuildError, ExplorerError, ScheduleError
from explorer.space import DesignSpace

GOLDEN = pathlib.Path(__file__).parent / "golden"

# shapes whose cuda design spaces give valid samples (the library's "small" shapes are
# too small for gemm-like ops: VerifyGPUCode asks for at least 32 threads per block)
SHAPES = {
    "gemm": dict(M=64, N=64, K=32),
    "batch_matmul": dict(B=2, M=32, N=32, K=16),
    "conv2d": dict(N=1, C=8, H=10, W=10, K=32, R=3, S=3, padding=1),
    "depthwise_conv2d": dict(N=1, C=8, H=9, W=9, R=3, S=3, padding=1),
    "dense_bias_relu": dict(M=16, N=32, K=24),
    "softmax": dict(M=2, N=300),
    "row_sum": dict(M=1, N=300),
    "elementwise": dict(M=6, N=70),
    "transpose": dict(M=20, N=36),
}


def _nvcc():
    from explorer.backends.cuda.nvcc import find_nvcc
    path = find_nvcc()
    if path is None:
        pytest.skip("nvcc (the CUDA toolkit) is not installed: the compile checks need it")
    return path


def _cxx():
    from explorer.backends.cuda.emulate import find_compiler
    try:
        return find_compiler()
    except ExplorerError as e:
        pytest.skip(f"no C++ compiler for the CUDA emulator: {e}")


def compiles(source: str, archs=("sm_80", "sm_90")) -> None:
    from explorer.backends.cuda.nvcc import compile_cubin
    _nvcc()
    for arch in archs:
        compiled = compile_cubin(source, arch)
        assert compiled.cubin and compiled.resources, arch


def check_everywhere(sch, wl, archs=("sm_80", "sm_90")):
    """The schedule's CUDA source compiles, its emulated run equals numpy, and the
    interpreter runs it race-free and equal to numpy too; returns the kernel."""
    kernel = build(sch, "cuda")
    if archs:
        compiles(kernel.source, archs)
    _cxx()
    args = wl.make_args(0)
    build(sch, "cuda", emulate=True)(*args)
    wl.check(args)
    args = wl.make_args(0)
    build(sch, "interp")(*args)          # races raise RaceError
    wl.check(args)
    return kernel


# ------------------------------------------------------------------ schedules

def golden_gemm():
    """A small shared-memory gemm: 8x8 threads per 8x8 output tile, A and B tiles of
    depth 16 fetched cooperatively into shared memory with float2 loads."""
    wl = ops.gemm(32, 32, 32)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 8])
    ko, ki = sch.split(k, [None, 16])
    sch.reorder(io, jo, ii, ji, ko, ki)
    sch.bind(io, "blockIdx.y")
    sch.bind(jo, "blockIdx.x")
    sch.bind(ii, "threadIdx.y")
    sch.bind(ji, "threadIdx.x")
    for operand in (0, 1):
        s = sch.cache_read(c, operand, "shared")
        sch.compute_at(s, ko)
        fused = sch.fuse(*sch.get_loops(s)[-2:])
        ty, tx, v = sch.split(fused, [8, 8, 2])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(v)
    return sch, wl


def shared_tile(n=16, k=64, kt=8):
    """tests/test_gpu_lowering.py's shared tile under a serial loop inside the threads,
    its fetch bound to the threads."""
    from test_gpu_lowering import _shared_tile_sched
    sch, wl = _shared_tile_sched(n, k, kt)
    a = sch.get_block("A_shared")
    rows, cols = sch.get_loops(a)[-2:]      # the fetch: one element per thread
    sch.bind(rows, "threadIdx.y")
    sch.bind(cols, "threadIdx.x")
    return sch, wl


def shared_accumulator():
    """A shared write cache carried over the serial reduction loop (as in
    tests/test_gpu_lowering.py, with the write-back bound to the threads)."""
    wl = ops.gemm(16, 16, 32)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 8])
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.x")
    sch.split(k, [None, 8])
    cw = sch.cache_write(c, 0, "shared")
    sch.reverse_compute_at(cw, io)
    sch.bind(sch.get_loops(cw)[1], "threadIdx.x")     # each thread writes back its row
    return sch, wl


def rfactor_row_sum():
    """rfactor, then the factored loop on threads: each thread its own partial sum."""
    wl = ops.row_sum(4, 256)
    sch = Schedule(wl)
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    ko, ki = sch.split(k, [None, 32])
    rf = sch.rfactor(ki, 0)
    i_rf, ko_rf, ki_rf = sch.get_loops(rf)
    sch.reorder(ki_rf, ko_rf)
    sch.bind(i_rf, "blockIdx.x")
    sch.bind(ki_rf, "threadIdx.x")
    i2, _ = sch.get_loops(b)
    sch.bind(i2, "blockIdx.x")
    return sch, wl


def cross_thread_row_sum(m=2, n=300, threads=64, tag="threadIdx.x"):
    """A reduction loop bound to threads, marked for a cross-thread reduction."""
    wl = ops.row_sum(m, n)
    sch = Schedule(wl)
    i, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, [None, threads])
    sch.annotate(sch.get_block("B"), "cross_thread_reduction", 1)
    sch.bind(i, "blockIdx.x")
    sch.bind(k1, tag)
    return sch, wl


def cross_thread_guarded_rows():
    """Rows on threadIdx.y split 2 x 2 for 3: the update is guarded per row, so the
    final write of each row's total is too (row 3 does not exist)."""
    wl = ops.row_sum(3, 64)
    sch = Schedule(wl)
    i, k = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [None, 2])
    sch.annotate(sch.get_block("B"), "cross_thread_reduction", 1)
    _, k1 = sch.split(k, [None, 32])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(k1, "threadIdx.x")
    return sch, wl


def vectorized_elementwise(m=8, n=64, lanes=8):
    wl = ops.elementwise(m, n)
    sch = Schedule(wl)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    jo, ji = sch.split(j, [None, lanes])
    sch.bind(jo, "threadIdx.x")
    sch.vectorize(ji)
    return sch, wl


HAND_WRITTEN = {
    "golden_gemm": golden_gemm,
    "shared_tile": shared_tile,
    "shared_tile_overshooting": lambda: shared_tile(16, 60, 8),
    "shared_accumulator": shared_accumulator,
    "rfactor_row_sum": rfactor_row_sum,
    "cross_thread_warp": lambda: cross_thread_row_sum(2, 100, 16),
    "cross_thread_blocks_of_warps": lambda: cross_thread_row_sum(2, 300, 128),
    "cross_thread_not_a_power_of_two": lambda: cross_thread_row_sum(3, 50, 12),
    "cross_thread_guarded_rows": cross_thread_guarded_rows,
    "vectorized_elementwise": vectorized_elementwise,
}


# ------------------------------------------------------------------ golden source

def test_golden_gemm_source_is_pinned_and_runs():
    sch, wl = golden_gemm()
    kernel = build(sch, "cuda")
    golden = (GOLDEN / "cuda_gemm_shared.cu").read_text()
    assert kernel.source == golden, (
        "the CUDA C of the golden gemm changed; if that is intended, write "
        "build(golden_gemm()[0], 'cuda').source to tests/golden/cuda_gemm_shared.cu. "
        f"Now:\n{kernel.source}")
    src = kernel.source
    assert "const int i_1 = threadIdx.y;" in src and "const int j_0 = blockIdx.x;" in src
    assert "__shared__ __align__(16) float A_shared[8][16];" in src
    assert src.count("__syncthreads();") == 2          # after the fetch, before the refill
    assert src.count("*(const float2*)&") == 2
    (launch,) = kernel.module.launches
    assert launch.grid == (4, 4, 1) and launch.block == (8, 8, 1)
    assert launch.args == ("A", "B", "C") and launch.static_shared_bytes == 2 * 8 * 16 * 4
    check_everywhere(sch, wl)


# ------------------------------------------------------------------ structure

def _kernel_sources(src: str) -> list:
    return re.findall(r'extern "C" __global__ void', src)


def test_one_kernel_per_launch_and_scratch_buffers_between_them():
    wl = ops.get("softmax", **SHAPES["softmax"])
    sch = DesignSpace(wl, "cuda").sample(1, seed=3)[0]
    kernel = build(sch, "cuda")
    plan = barrier_points(lower(sch))
    mod = kernel.module
    assert len(_kernel_sources(kernel.source)) == len(mod.launches) == len(plan.launches) > 1
    assert [b.name for b in mod.scratch] == ["row_max", "row_sum"]
    assert [b.name for b in mod.params] == ["X", "norm"]
    assert "//   float* row_max = scratch(2);" in kernel.source     # the host side, in order
    calls = re.findall(r"//   (\w+)<<<", kernel.source)
    assert calls == [la.name for la in mod.launches]
    for n, launch in enumerate(mod.launches):
        assert f"// launch {n}: grid ({', '.join(map(str, launch.grid))})" in kernel.source
        assert launch.grid == plan.launches[n].grid and launch.block == plan.launches[n].block
    _cxx()
    args = wl.make_args(0)
    build(sch, "cuda", emulate=True)(*args)
    wl.check(args)


def _divergent_barriers(src: str) -> list:
    """``__syncthreads()`` lines inside an ``if`` whose condition reads a thread index."""
    thread_vars = set(re.findall(r"const int (\w+) = threadIdx\.[xyz];", src))
    stack, bad = [], []
    for line in src.splitlines():
        text = line.split("//")[0].strip()
        if text.startswith("}"):
            stack.pop()
        if "__syncthreads();" in text and not text.startswith("if"):
            for opener in stack:
                if opener.startswith("if") and (
                        "threadIdx" in opener
                        or set(re.findall(r"\w+", opener)) & thread_vars):
                    bad.append((opener, text))
        if text.endswith("{"):
            stack.append(text)
    return bad


def _samples(op: str, n: int, seed: int = 0) -> tuple:
    wl = ops.get(op, **SHAPES[op])
    return wl, DesignSpace(wl, "cuda", max_tries=2000).sample(n, seed=seed)


@pytest.mark.parametrize("op", sorted(SHAPES))
def test_barriers_are_uniform_params_const_restrict_and_launches_match(op):
    wl, schedules = _samples(op, 3, seed=11)
    for sch in schedules:
        low = lower(sch)
        kernel = build(sch, "cuda")
        src = kernel.source
        assert _divergent_barriers(src) == [], src
        output = wl.func.params[-1].name
        for launch in kernel.module.launches:
            sig = re.search(rf"{launch.name}\((.*)\) {{", src).group(1)
            assert f"__launch_bounds__({int(np.prod(launch.block))})" in src
            for arg in launch.args:       # every parameter restrict; read-only ones const
                assert re.search(rf"float\* __restrict__ {arg}\b", sig), sig
            if output in launch.args:
                assert f"const float* __restrict__ {output}" not in sig, sig
        for name in (p.name for p in wl.func.params[:-1]):
            assert f"const float* __restrict__ {name}" in src, src
        assert src.count("__syncthreads();") >= len(barrier_points(low))


def test_vector_types_only_where_alignment_is_proven():
    aligned, wl = vectorized_elementwise(8, 64, 8)
    src = build(aligned, "cuda").source
    assert "*(const float4*)&A[j_1_c * 4 + j_0 * 8 + i * 64]" in src
    check_everywhere(aligned, wl, archs=("sm_90",))
    # rows of 66: j_0 * 2 + i * 66 is even, so float2 holds; float4 would not
    odd, wl = vectorized_elementwise(3, 66, 2)
    src = build(odd, "cuda").source
    assert "float2" in src and "float4" not in src
    # rows of 63 and 3 lanes: no vector type fits; a plain unrolled loop
    plain, wl3 = vectorized_elementwise(2, 63, 3)
    src = build(plain, "cuda").source
    assert "float2" not in src and "float4" not in src and "#pragma unroll" in src
    check_everywhere(plain, wl3, archs=())


def test_misaligned_shared_fetch_stays_scalar():
    """A tile row of 15 floats: a float2 of the fused fetch would straddle two rows."""
    wl = ops.gemm(16, 16, 30)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 8])
    ko, ki = sch.split(k, [None, 15])
    sch.reorder(io, ii, ko, ki)
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.x")
    s = sch.cache_read(c, 0, "shared")
    sch.compute_at(s, ko)
    fused = sch.fuse(*sch.get_loops(s)[-2:])
    _, tx, v = sch.split(fused, [None, 8, 2])
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(v)
    src = build(sch, "cuda").source
    assert "float2" not in src and "#pragma unroll" in src
    check_everywhere(sch, wl, archs=())


def test_cross_thread_reductions_use_shuffles_within_a_warp_and_shared_memory_beyond():
    warp = build(cross_thread_row_sum(2, 100, 16)[0], "cuda").source
    assert "__shfl_xor_sync" in warp and "__syncthreads" not in warp
    assert "0xffffu << (red_tid & 16)" in warp          # the group of 16 lanes
    wide = build(cross_thread_row_sum(2, 300, 128)[0], "cuda").source
    assert "__shfl_xor_sync(0xffffffffu" in wide and "B_red_warp[4]" in wide
    odd = build(cross_thread_row_sum(3, 50, 12)[0], "cuda").source
    assert "__shfl" not in odd and "B_red_buf[12]" in odd
    for src in (warp, wide, odd):
        assert "if (threadIdx.x == 0) {" in src and "B[i] = B_red;" in src
    guarded = build(cross_thread_guarded_rows()[0], "cuda").source
    assert "if (threadIdx.x == 0 && i_1 + i_0 * 2 < 3) {" in guarded


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_hand_written_schedules_emulate_equal_numpy_and_run_race_free(name):
    sch, wl = HAND_WRITTEN[name]()
    check_everywhere(sch, wl, archs=())


def test_dynamic_shared_memory_above_48_kib():
    """A 128 x 128 float tile of A (64 KiB) per block: a dynamic pool, the launch asks
    for it."""
    wl = ops.gemm(128, 8, 128)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.reorder(j, i, k)
    sch.bind(j, "blockIdx.x")
    sch.bind(i, "threadIdx.x")
    for operand in (0, 1):
        s = sch.cache_read(c, operand, "shared")
        sch.compute_at(s, j)
        fused = sch.fuse(*sch.get_loops(s)[1:])
        _, tx = sch.split(fused, [None, 128])
        sch.bind(tx, "threadIdx.x")
    kernel = build(sch, "cuda")
    (launch,) = kernel.module.launches
    assert launch.dynamic_shared_bytes >= 128 * 128 * 4 and launch.static_shared_bytes == 0
    assert "EXPLORER_DYNAMIC_SHARED(unsigned char, explorer_shared);" in kernel.source
    assert "#define EXPLORER_DYNAMIC_SHARED" in kernel.source
    check_everywhere(sch, wl, archs=("sm_90",))


def test_integer_floor_division_of_negative_values_matches_numpy():
    """A reversed index (``n - 1 - j``) divided by a constant may be negative before the
    guard: the generated C uses floor division where it cannot prove the sign."""
    from explorer.backends.cuda.cexpr import CExpr
    from explorer.ir.expr import FloorDiv, FloorMod, Var, const
    x = Var("x")
    cx = CExpr(lambda ld: "?", {"x": (-5, 5)})
    assert cx(FloorDiv(x, const(4))) == "explorer_floordiv(x, 4)"
    assert cx(FloorMod(x, const(4))) == "explorer_floormod(x, 4)"
    cx = CExpr(lambda ld: "?", {"x": (0, 5)})
    assert cx(FloorDiv(x, const(4))) == "x / 4" and cx(FloorMod(x, const(4))) == "x % 4"


def test_names_c_cannot_keep_are_renamed_and_still_run():
    from explorer import te
    x = te.placeholder((8, 64), "float32", "in-put")
    y = te.compute((8, 64), lambda i, j: x[i, j] * 2.0, "int")
    sch = Schedule(te.create_func([x, y]))
    i, j = sch.get_loops(sch.get_block("int"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    src = build(sch, "cuda").source
    assert "int_kernel0(const float* __restrict__ in_put_, float* __restrict__ int_)" in src
    assert "int_[j + i * 64] = in_put_[j + i * 64] * 2.0f;" in src
    _cxx()
    a = np.random.default_rng(0).random((8, 64), dtype=np.float32)
    b = np.zeros((8, 64), np.float32)
    build(sch, "cuda", emulate=True)(a, b)
    np.testing.assert_array_equal(b, a * 2)


# ------------------------------------------------------------------ bad input

def test_an_unbound_schedule_is_refused_with_what_to_bind():
    wl = ops.gemm(16, 16, 16)
    with pytest.raises(BuildError, match=r"no loop is bound to blockIdx/threadIdx.*"
                                         r"sch\.bind\(i, 'blockIdx\.x'\)"):
        build(Schedule(wl), "cuda")


def test_an_outer_loop_left_on_the_host_is_refused():
    wl = ops.elementwise(8, 64)
    sch = Schedule(wl)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(j, "threadIdx.x")
    with pytest.raises(BuildError, match=r"loop 'i' runs outside every kernel launch"):
        build(sch, "cuda")


def test_more_threads_than_the_target_allows_names_the_loop_and_the_limit():
    wl = ops.elementwise(4, 512)
    sch = Schedule(wl)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    small = Target("cuda").with_(max_threads_per_block=256)
    with pytest.raises(BuildError, match=r"512 threads per block.*loops 'j'.*256"):
        build(sch, small)
    with pytest.raises(ScheduleError, match=r"threadIdx.x is at most 1024"):
        s2 = Schedule(ops.elementwise(4, 2048))
        s2.bind(s2.get_loops(s2.get_block("C"))[1], "threadIdx.x")


def test_running_without_pycuda_says_how_to_install_it():
    pytest.importorskip("numpy")
    try:
        import pycuda.driver  # noqa: F401
        pytest.skip("pycuda is installed here")
    except ImportError:
        pass
    sch, wl = golden_gemm()
    kernel = build(sch, "cuda")
    assert kernel.source.startswith("// gemm for sm_90")    # generated without a GPU
    with pytest.raises(BuildError, match=r"pycuda is not installed: pip install -e '\.\[cuda\]'"):
        kernel(*wl.make_args(0))


# ------------------------------------------------------------------ the design spaces

@pytest.mark.parametrize("op", sorted(SHAPES))
def test_a_sampled_schedule_per_op_compiles_emulates_and_is_race_free(op):
    wl, (sch,) = _samples(op, 1, seed=5)
    check_everywhere(sch, wl, archs=("sm_90",))


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(SHAPES))
def test_five_sampled_schedules_per_op_compile_for_sm80_and_sm90_and_equal_numpy(op):
    wl, schedules = _samples(op, 5, seed=21)
    for sch in schedules:
        check_everywhere(sch, wl)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_hand_written_schedules_compile_for_sm80_and_sm90(name):
    sch, _ = HAND_WRITTEN[name]()
    compiles(build(sch, "cuda").source)
