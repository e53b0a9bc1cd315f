"""The LLVM kernel object, the module cache, the llvm Target and build errors."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from explorer.backends import build
from explorer.target import host
from explorer.backends.llvm import build_llvm, clear_cache, compile_lowered
from explorer.target import Target
from explorer.errors import ArgumentError, BuildError
from explorer.ir.expr import Buffer, FloatImm, Var
from explorer.ir.stmt import BufferStore, For, PrimFunc

i, v = Var("i"), Var("v")


def axpy(n=64, name="axpy") -> PrimFunc:
    X, Y, Z = Buffer("X", (n,)), Buffer("Y", (n,)), Buffer("Z", (n,))
    idx = i * 16 + v
    body = For(i, n // 16, For(v, 16, BufferStore(Z, X[idx] * 2.0 + Y[idx], (idx,)),
                               "vectorized"))
    return PrimFunc(name, (X, Y, Z), body, (), (("lowered", True),))


def test_kernel_exposes_ir_assembly_and_compile_time():
    clear_cache()
    kern = build(axpy(), "llvm")
    assert "define void @explorer_axpy" in kern.llvm_ir.replace('"', "")
    assert "<16 x float>" in kern.llvm_ir
    assert "noalias" in kern.llvm_ir
    assert 0 < kern.compile_seconds < 10
    asm = kern.assembly
    assert "explorer_axpy" in asm
    if Target("llvm").vector_bits == 512:
        assert "zmm" in asm
    x, y = np.arange(64, dtype=np.float32), np.ones(64, np.float32)
    z = np.zeros(64, np.float32)
    kern(x, y, z)
    np.testing.assert_array_equal(z, 2 * x + 1)


def test_modules_are_cached_by_structure():
    clear_cache()
    t = Target("llvm")
    a = compile_lowered(axpy(), t)
    b = compile_lowered(axpy(), t)             # equal but distinct objects
    c = compile_lowered(axpy(128), t)
    d = compile_lowered(axpy(), Target("llvm -num-cores=1"))
    assert a is b and a is not c and a is not d
    k1, k2 = build(axpy(), "llvm"), build(axpy(), "llvm")
    assert k1.compiled is k2.compiled


def test_thread_bound_loop_is_refused_with_a_hint():
    A = Buffer("A", (32,))
    tx = Var("tx")
    body = For(tx, 32, BufferStore(A, FloatImm(1.0), (tx,)), "thread", "threadIdx.x")
    f = PrimFunc("gpu", (A,), body, (), (("lowered", True),))
    with pytest.raises(BuildError, match="cuda.*interp|interp.*cuda"):
        build(f, "llvm")


def test_misaligned_arrays_are_copied_and_written_back():
    kern = build(axpy(), "llvm")
    raw = np.zeros(3 * 65, np.float32)
    x, y, z = raw[1:65], raw[66:130], raw[131:195]   # 4 bytes past 16-byte alignment
    x[:] = np.arange(64)
    y[:] = 3
    kern(x, y, z)
    np.testing.assert_array_equal(z, 2 * np.arange(64) + 3)


def test_overlapping_output_is_refused_shared_inputs_are_fine():
    kern = build(axpy(), "llvm")
    x = np.ones(64, np.float32)
    with pytest.raises(ArgumentError, match="share memory"):
        kern(x, np.ones(64, np.float32), x)
    raw = np.ones(100, np.float32)
    with pytest.raises(ArgumentError, match="share memory"):
        kern(raw[:64], np.ones(64, np.float32), raw[36:])
    z = np.zeros(64, np.float32)
    kern(x, x, z)
    np.testing.assert_array_equal(z, 3 * x)


def test_a_bound_call_checks_once_and_runs_the_kernel_on_its_arrays():
    """``bind`` (the timing loops' call) takes the pointers once; it must give what a
    checked call gives, aligned or not, and refuse what a checked call refuses."""
    kern = build(axpy(), "llvm")
    x, y = np.arange(64, dtype=np.float32), np.full(64, 3, np.float32)
    z = np.zeros(64, np.float32)
    call = kern.bind(x, y, z)
    x[:] = np.arange(64)[::-1]          # the call reads the arrays' memory when it runs
    for _ in range(2):
        call()
        np.testing.assert_array_equal(z, 2 * x + 3)
    raw = np.zeros(3 * 65, np.float32)
    mx, my, mz = raw[1:65], raw[66:130], raw[131:195]   # 4 bytes past 16-byte alignment
    mx[:], my[:] = np.arange(64), 1
    kern.bind(mx, my, mz)()
    np.testing.assert_array_equal(mz, 2 * np.arange(64) + 1)
    with pytest.raises(ArgumentError, match="share memory"):
        kern.bind(x, y, x)
    with pytest.raises(ArgumentError, match="dtype"):
        kern.bind(np.ones(64), y, z)
    with pytest.raises(ArgumentError, match="takes 3 arrays"):
        kern.bind(x, y)


def test_a_bound_call_outlives_its_kernel_object_and_the_cache():
    """The call alone keeps the compiled code alive: with the kernel object dropped and
    the cache cleared it still runs (it called freed code before). In a child process,
    so a regression fails this test instead of ending the run."""
    code = (
        "import gc, numpy as np\n"
        "from explorer.backends import build\n"
        "from explorer.backends.llvm import clear_cache\n"
        "import tests.test_llvm_kernel as t\n"
        "x = np.arange(64, dtype=np.float32); y = np.ones(64, np.float32)\n"
        "z = np.zeros(64, np.float32)\n"
        "call = build(t.axpy(name='outlives'), 'llvm').bind(x, y, z)\n"
        "clear_cache(); gc.collect()\n"
        "build(t.axpy(n=128, name='other'), 'llvm')\n"
        "call()\n"
        "assert np.array_equal(z, 2 * x + 1), z\n"
        "print('ok')\n")
    root = Path(__file__).resolve().parent.parent
    run = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", (run.returncode, run.stderr[-800:])


def test_wrong_arguments_are_checked_by_the_base_class():
    kern = build(axpy(), "llvm")
    with pytest.raises(ArgumentError, match="dtype"):
        kern(np.ones(64), np.ones(64, np.float32), np.ones(64, np.float32))


def test_target_reads_the_host():
    t = Target("llvm")
    name, features = host.host_cpu()
    assert t.mcpu == name and t.features == features
    assert t.num_cores >= 1
    expected = 512 if "+avx512f" in features.split(",") else (
        256 if "+avx" in features.split(",") else 128)
    assert t.vector_bits == expected
    assert t.l1_bytes > 0 and t.l2_bytes >= t.l1_bytes


def test_target_overrides():
    t = Target("llvm -mcpu=haswell -num-cores=3")
    assert (t.mcpu, t.num_cores, t.vector_bits) == ("haswell", 3, 256)
    # a CPU other than the host's gets no feature string (LLVM derives it from the name)
    assert t.features == ("" if host.host_cpu()[0] != "haswell" else host.host_cpu()[1])
    assert Target("llvm -mcpu=skylake-avx512").vector_bits == 512
    assert Target("llvm", l2_bytes=12345).l2_bytes == 12345
    kern = build_llvm(axpy(), axpy(), t)
    assert "zmm" not in kern.assembly   # haswell has no AVX-512
    x, y, z = (np.arange(64, dtype=np.float32) for _ in range(3))
    kern(x, y, z)
    np.testing.assert_array_equal(z, 3 * x)


def test_sysfs_cache_size_parser():
    assert host._parse_size("48K") == 48 * 1024
    assert host._parse_size("2048K\n") == 2 * 1024 * 1024
    assert host._parse_size("300M") == 300 * 1024 ** 2


def test_concurrent_builds_from_threads():
    import threading
    clear_cache()
    results, errors = {}, []

    def work(n):
        try:
            kern = build(axpy(16 * n, name=f"axpy{n}"), "llvm")
            x = np.arange(16 * n, dtype=np.float32)
            z = np.zeros_like(x)
            kern(x, x, z)
            results[n] = bool((z == 3 * x).all())
        except Exception as err:  # surfaced by the assert below
            errors.append(err)
    threads = [threading.Thread(target=work, args=(n,)) for n in range(1, 7)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and results == {n: True for n in range(1, 7)}
