"""The host emulator of generated CUDA C (explorer/backends/cuda/emulate.py): hand-written
sources that follow the code generator's contract, then the generator's own output,
each run compared with numpy."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from explorer.backends.cuda import emulate
from explorer.backends.cuda.module import BufferSpec, CudaModule, KernelLaunch
from explorer.errors import ArgumentError, BuildError, KernelFault, RaceError

SOURCES = Path(__file__).with_name("cuda_sources")

try:
    emulate.find_compiler()
    NO_CXX = None
except BuildError as e:
    NO_CXX = str(e)
needs_cxx = pytest.mark.skipif(NO_CXX is not None, reason=NO_CXX or "")
pytestmark = needs_cxx


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory):
    """An XDG cache home of this module's own: the precompiled shim is built once."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture
def cache(cache_home, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    return emulate.cache_dir()


def source(name: str, **defines) -> str:
    head = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    return head + (SOURCES / name).read_text()


def gemm_module(M, N, K, tile=16) -> CudaModule:
    grid = (-(-N // tile), -(-M // tile), 1)
    return CudaModule(
        "gemm", source("gemm_tiled.cu", M=M, N=N, K=K),
        (KernelLaunch("gemm_tiled", grid, (tile, tile, 1), ("C", "A", "B"),
                      static_shared_bytes=2 * tile * tile * 4),),
        (BufferSpec("C", "float32", (M, N)), BufferSpec("A", "float32", (M, K)),
         BufferSpec("B", "float32", (K, N))))


def gemm_args(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    return np.full((M, N), np.nan, np.float32), a, b


@pytest.mark.parametrize("executor", ["fibers", "threads"])
def test_tiled_gemm_with_barriers_equals_numpy(cache, executor):
    em = emulate.load(gemm_module(48, 48, 64), executor, cache=cache)
    c, a, b = gemm_args(48, 48, 64)
    em.run([c, a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-4)


def test_shape_that_does_not_divide_runs_its_guards(cache):
    M, N, K = 50, 37, 23                      # 4 x 4 blocks, the last ones partly idle
    em = emulate.load(gemm_module(M, N, K), cache=cache)
    c, a, b = gemm_args(M, N, K, seed=1)
    em.run([c, a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-4)


def test_warp_shuffle_reductions_full_warp_and_groups_of_eight(cache):
    rows, cols = 12, 100
    src = source("row_sum_shuffle.cu", COLS=cols)
    bufs = (BufferSpec("A", "float32", (rows, cols)), BufferSpec("B", "float32", (rows,)))
    a = np.random.default_rng(2).standard_normal((rows, cols), dtype=np.float32)
    for kernel, grid, block in [("row_sum_warps", rows, 64), ("row_sum_groups", rows // 4, 32)]:
        mod = CudaModule("row_sum", src, (KernelLaunch(kernel, (grid, 1, 1), (block, 1, 1),
                                                       ("A", "B")),), bufs)
        b = np.zeros(rows, np.float32)
        emulate.load(mod, cache=cache).run([a, b])
        np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5, atol=1e-4, err_msg=kernel)


def reverse_module(blocks: int, dynamic_bytes: int) -> CudaModule:
    n = 16384
    return CudaModule(
        "reverse", source("dynamic_reverse.cu"),
        (KernelLaunch("reverse_dynamic", (blocks, 1, 1), (1024, 1, 1), ("C", "A"),
                      dynamic_shared_bytes=dynamic_bytes),),
        (BufferSpec("C", "float32", (blocks, n)), BufferSpec("A", "float32", (blocks, n))))


def test_three_dimensional_grid_and_block_numbering_and_lanes(cache):
    grid, block = (2, 3, 2), (8, 4, 2)
    mod = CudaModule("numbering", source("indexing.cu"),
                     (KernelLaunch("numbering", grid, block, ("Out",)),),
                     (BufferSpec("Out", "int32", (12, 64, 4)),))
    out = np.full((12, 64, 4), -7, np.int32)
    emulate.load(mod, cache=cache).run([out])
    tid = np.arange(64)
    np.testing.assert_array_equal(out[:, :, 0], np.tile(tid, (12, 1)))
    np.testing.assert_array_equal(out[:, :, 1], np.tile(tid // 32 * 32, (12, 1)))
    np.testing.assert_array_equal(out[:, :, 2], np.repeat(np.arange(12)[:, None], 64, axis=1))
    up = np.where(tid % 32 == 0, tid, tid - 1)          # lane 0 keeps its own value
    np.testing.assert_array_equal(out[:, :, 3], np.tile(up, (12, 1)))


def test_dynamic_shared_memory_through_the_macro(cache):
    a = np.random.default_rng(3).standard_normal((3, 16384), dtype=np.float32)
    c = np.zeros_like(a)
    emulate.load(reverse_module(3, 16384 * 4), cache=cache).run([c, a])
    np.testing.assert_array_equal(c, a[:, ::-1])
    # a launch that asks for no dynamic shared memory has none to use
    with pytest.raises(KernelFault, match="kernel reverse_dynamic, block \\(0, 0, 0\\)"):
        emulate.load(reverse_module(3, 0), cache=cache).run([c, a])


def test_int_float64_and_vector_accesses(cache):
    n = 1000                                  # double_math's last block is guarded
    src = source("dtypes.cu", N=n)
    mod = CudaModule(
        "dtypes", src,
        (KernelLaunch("int_axpy", (2, 1, 1), (64, 1, 1), ("C", "A", "B")),
         KernelLaunch("double_math", (-(-n // 128), 1, 1), (128, 1, 1), ("Y", "X")),
         KernelLaunch("relu_float2", (4, 1, 1), (32, 1, 1), ("Z", "W"))),
        (BufferSpec("C", "int32", (512,)), BufferSpec("A", "int32", (512,)),
         BufferSpec("B", "int32", (512,)), BufferSpec("Y", "float64", (n,)),
         BufferSpec("X", "float64", (n,)), BufferSpec("Z", "float32", (256,)),
         BufferSpec("W", "float32", (256,))))
    rng = np.random.default_rng(4)
    a, b = (rng.integers(-1000, 1000, 512).astype(np.int32) for _ in range(2))
    x = rng.standard_normal(n)
    w = rng.standard_normal(256).astype(np.float32)
    c, y, z = np.zeros(512, np.int32), np.zeros(n), np.zeros(256, np.float32)
    emulate.load(mod, cache=cache).run([c, a, b, y, x, z, w])
    np.testing.assert_array_equal(c, 3 * a + b)
    np.testing.assert_allclose(y, np.exp(x) * 2 - np.sqrt(np.abs(x)), rtol=1e-12)
    np.testing.assert_array_equal(z, np.maximum(w, 0))


def scratch_module() -> CudaModule:
    return CudaModule(
        "scale_add", source("scratch_two_launches.cu"),
        (KernelLaunch("scale_rev", (4, 1, 1), (256, 1, 1), ("T", "A")),
         KernelLaunch("add", (4, 1, 1), (256, 1, 1), ("C", "T", "B"))),
        (BufferSpec("A", "float32", (1024,)), BufferSpec("B", "float32", (1024,)),
         BufferSpec("C", "float32", (1024,)), BufferSpec("T", "float32", (1024,), scratch=True)))


def test_two_launches_through_a_scratch_buffer(cache):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(1024, dtype=np.float32), rng.standard_normal(1024, dtype=np.float32)
    c = np.zeros(1024, np.float32)
    emulate.load(scratch_module(), cache=cache).run([a, b, c])
    np.testing.assert_allclose(c, 2 * a.reshape(4, 256)[:, ::-1].ravel() + b, rtol=1e-6)


def test_unaligned_arrays_are_staged_and_outputs_written_back(cache):
    rng = np.random.default_rng(6)
    raw = np.zeros(4 * 1024 + 1, np.float32)
    a, b = raw[1:1025], raw[1025:2049]          # 4 bytes past an aligned start
    a[...] = rng.standard_normal(1024)
    b[...] = rng.standard_normal(1024)
    c = raw[2049:3073]
    assert c.ctypes.data % 16 != 0
    emulate.load(scratch_module(), cache=cache).run([a, b, c])
    np.testing.assert_allclose(c, 2 * a.reshape(4, 256)[:, ::-1].ravel() + b, rtol=1e-6)


def broken_module(kernel: str, block=64) -> CudaModule:
    args = ("C", "A", "idx") if kernel == "gather" else ("C",)
    return CudaModule(
        "broken", source("broken.cu"),
        (KernelLaunch(kernel, (2, 1, 1), (block, 1, 1), args),),
        (BufferSpec("C", "float32", (128,)), BufferSpec("A", "float32", (128,)),
         BufferSpec("idx", "int64", (64,))))


def broken_args():
    return [np.zeros(128, np.float32), np.ones(128, np.float32), np.zeros(64, np.int64)]


@pytest.mark.parametrize("executor", ["fibers", "threads"])
@pytest.mark.parametrize("kernel, where", [          # in either order, as threads arrive
    ("barrier_some", ["__syncthreads() at line 6", "the end of the kernel"]),
    ("barrier_in_uneven_loop", ["__syncthreads() at line 15", "the end of the kernel"]),
    ("shuffle_half_warp", ["16 thread(s) from linear id 0 at a warp shuffle at line 24",
                           "48 thread(s) from linear id 16 at the end of the kernel"]),
])
def test_divergent_barrier_is_a_clear_error_not_a_hang(cache, executor, kernel, where):
    em = emulate.load(broken_module(kernel), executor, cache=cache)
    start = time.perf_counter()
    with pytest.raises(RaceError, match=rf"kernel {kernel}, block \(0, 0, 0\): a barrier "
                                        rf"not every thread reaches") as info:
        em.run(broken_args())
    assert time.perf_counter() - start < 10
    assert all(w in str(info.value) for w in where), str(info.value)


@pytest.mark.parametrize("executor", ["fibers", "threads"])
def test_a_faulting_kernel_raises_and_the_process_goes_on(cache, executor):
    em = emulate.load(broken_module("gather"), executor, cache=cache)
    args = broken_args()
    args[2][5] = 1 << 58                       # 2**60 bytes past A: no mapping there
    with pytest.raises(KernelFault, match=r"kernel gather, block \(0, 0, 0\), thread "
                                          r"\(5, 0, 0\): segmentation fault"):
        em.run(args)
    args[2][5] = 7                             # the same module runs again, correctly
    em.run(args)
    np.testing.assert_array_equal(args[0][:64], np.ones(64, np.float32))


CRASH_ELSEWHERE = """
import ctypes, sys
sys.path.insert(0, {tests!r})
from test_cuda_emulate import broken_args, broken_module, gemm_args, gemm_module
from explorer.backends.cuda import emulate
from explorer.errors import KernelFault
one, two = emulate.load(gemm_module(16, 16, 16)), emulate.load(broken_module("gather"))
one.run(list(gemm_args(16, 16, 16)))
args = broken_args()
args[2][0] = 1 << 58
try:
    two.run(args)
except KernelFault:
    print("fault reported", flush=True)
one.run(list(gemm_args(16, 16, 16)))
ctypes.string_at(0)                    # a crash outside the emulator's threads
print("survived")
"""


def test_a_crash_outside_the_emulator_still_kills_the_process(cache, cache_home):
    # Each loaded module chains to the fault handler it found; a fault in no emulated
    # thread must reach the default action, not loop between two modules' handlers.
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    code = CRASH_ELSEWHERE.format(tests=str(SOURCES.parent))
    out = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code],
                         capture_output=True, text=True, timeout=120, env=env)
    assert "fault reported" in out.stdout and "survived" not in out.stdout
    assert out.returncode == -signal.SIGSEGV, out.stderr[-2000:]
    assert "Fatal Python error: Segmentation fault" in out.stderr   # faulthandler was reached


def test_second_load_hits_the_user_cache(cache, cache_home):
    mod = gemm_module(16, 16, 16)
    first = emulate.load(mod)
    assert first.path.parent == cache_home / "schedule-explorer" / "cuda-emu"
    second = emulate.load(mod)
    assert second.from_cache and second.compile_seconds == 0.0 and second.path == first.path
    other = emulate.load(gemm_module(16, 16, 32))
    assert other.path != first.path and other.compile_seconds > 0


def test_two_compiles_of_one_source_at_once_both_succeed(cache):
    mod = gemm_module(24, 8, 8)
    loaded, errors = [], []

    def go():
        try:
            loaded.append(emulate.load(mod, cache=cache))
        except Exception as e:   # noqa: BLE001 - reported below
            errors.append(e)
    workers = [threading.Thread(target=go) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors and len({m.path for m in loaded}) == 1
    assert not [p for p in cache.iterdir() if p.suffix == ".tmp"]     # no leftovers
    c, a, b = gemm_args(24, 8, 8)
    loaded[0].run([c, a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_compile_errors_show_the_compilers_first_lines(cache):
    mod = CudaModule("bad", 'extern "C" __global__ void k(float* C) { C[0] = undeclared; }',
                     (KernelLaunch("k", (1, 1, 1), (1, 1, 1), ("C",)),),
                     (BufferSpec("C", "float32", (1,)),))
    with pytest.raises(BuildError, match=r"could not compile the CUDA source of bad(.|\n)*"
                                         r"'undeclared' was not declared"):
        emulate.load(mod, cache=cache)


def test_launches_that_do_not_fit_the_kernels_are_refused(cache):
    src = 'extern "C" __global__ void k(float* __restrict__ C, const int* __restrict__ D) {}'
    bufs = (BufferSpec("C", "float32", (8,)), BufferSpec("D", "float32", (8,)))
    for args, what in [(("C", "D"), r"\(float\* C, float\* D\)"), (("C",), r"\(float\* C\)")]:
        mod = CudaModule("mismatch", src, (KernelLaunch("k", (1, 1, 1), (8, 1, 1), args),), bufs)
        with pytest.raises(BuildError, match=rf"kernel k must take {what} as its launch passes"):
            emulate.load(mod, cache=cache)
    mod = CudaModule("missing", src, (KernelLaunch("k2", (1, 1, 1), (8, 1, 1), ("C",)),), bufs)
    with pytest.raises(BuildError, match="kernel k2 is launched but not defined in the source"):
        emulate.load(mod, cache=cache)


def test_a_missing_barrier_shows_as_a_wrong_result(cache):
    # The emulator runs the code, barriers included: without the barrier between the
    # cooperative fetch and its use, threads read tiles their neighbours have not written.
    mod = gemm_module(32, 32, 32)
    racy = CudaModule(mod.func_name, mod.source.replace("__syncthreads();", "", 1),
                      mod.launches, mod.buffers)
    c, a, b = gemm_args(32, 32, 32)
    emulate.load(racy, cache=cache).run([c, a, b])
    assert not np.allclose(c, a @ b, rtol=1e-3, atol=1e-3)
    emulate.load(mod, cache=cache).run([c, a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-4)


def test_missing_compiler_says_what_to_install(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(BuildError, match=r"install g\+\+"):
        emulate.load(gemm_module(16, 16, 16))
    monkeypatch.setenv("CXX", "no-such-compiler")
    with pytest.raises(BuildError, match="CXX is 'no-such-compiler', which is not an executable"):
        emulate.load(gemm_module(16, 16, 16))


def test_bad_launches_and_arrays_are_refused(cache):
    big = CudaModule("big", "", (KernelLaunch("k", (1, 1, 1), (64, 32, 1), ("C",)),),
                     (BufferSpec("C", "float32", (1,)),))
    with pytest.raises(BuildError, match="2048 threads per block, at most 1024"):
        emulate.load(big, cache=cache)
    em = emulate.load(gemm_module(16, 16, 16), cache=cache)
    c, a, b = gemm_args(16, 16, 16)
    with pytest.raises(ArgumentError, match=r"argument A has shape \(16, 8\)"):
        em.run([c, a[:, :8], b])
    with pytest.raises(ArgumentError, match="takes 3 arrays"):
        em.run([c, a])
    a.setflags(write=False)                   # a read-only input is taken, not written
    em.run([c, a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- the generator's sources
GENERATED = [("gemm", dict(M=32, N=32, K=16)), ("row_sum", dict(M=16, N=64)),
             ("softmax", dict(M=8, N=64)), ("conv2d", dict(N=1, C=4, H=6, W=6, K=4, R=3, S=3))]


@pytest.mark.parametrize("op, shape", GENERATED, ids=[op for op, _ in GENERATED])
def test_generated_cuda_emulated_equals_numpy(cache, op, shape):
    from explorer import ops
    from explorer.backends import build
    from explorer.space.design_space import DesignSpace
    wl = getattr(ops, op)(**shape)
    for i, sch in enumerate(DesignSpace(wl, "cuda", seed=0).sample(2, seed=11)):
        kernel = build(sch, "cuda", emulate=True)
        args = wl.make_args(seed=i)
        kernel(*args)
        wl.check(args)
