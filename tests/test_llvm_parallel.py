"""Parallel loops on the LLVM backend: outlining, captured state, nesting, both runtimes."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from explorer.backends.llvm import build_llvm, runtime
from explorer.target import Target
from explorer.ir.expr import LT, Add, Buffer, Cast, FloatImm, IntImm, Mul, Sub, Var
from explorer.ir.stmt import Allocate, BufferStore, For, IfThenElse, PrimFunc, seq

RUNTIMES = ["gomp", "pool"] if runtime.gomp_available() else ["pool"]
i, j, k, v, t = (Var(n) for n in ("i", "j", "k", "v", "t"))


def C(x):
    return IntImm(x)


def F(x):
    return FloatImm(float(x))


def lowered(params, body, name="par") -> PrimFunc:
    return PrimFunc(name, tuple(params), body, (), (("lowered", True),))


def build(f, rt, cores=2):
    return build_llvm(f, f, Target(f"llvm -num-cores={cores}"), rt)


@pytest.mark.parametrize("rt", RUNTIMES)
@pytest.mark.parametrize("extent", [1, 2, 3, 7, 64])
def test_parallel_outer_loop(rt, extent):
    A, B = Buffer("A", (extent, 16)), Buffer("B", (extent, 16))
    body = For(i, extent, For(v, 16, BufferStore(B, Add(Mul(A[i, v], F(2)), Cast(
        "float32", i)), (i, v)), "vectorized"), "parallel")
    a = np.random.rand(extent, 16).astype(np.float32)
    b = np.zeros_like(a)
    build(lowered([A, B], body), rt)(a, b)
    np.testing.assert_allclose(b, 2 * a + np.arange(extent)[:, None], rtol=1e-6)


@pytest.mark.parametrize("rt", RUNTIMES)
def test_parallel_runs_on_several_threads(rt):
    """Per-iteration partial sums in a per-thread local buffer, repeated: any sharing of
    the stack buffer between threads would corrupt them; the runtime's worker threads
    exist afterwards (libgomp's team or the pool)."""
    import os
    A, S = Buffer("A", (8, 1000)), Buffer("S", (8,))
    L = Buffer("L", (1,), scope="local")
    body = For(i, 8, Allocate(L, seq([
        BufferStore(L, F(0), (C(0),)),
        For(j, 1000, BufferStore(L, Add(L[C(0)], A[i, j]), (C(0),))),
        BufferStore(S, L[C(0)], (i,))])), "parallel")
    a = np.random.rand(8, 1000).astype(np.float32)
    s = np.zeros(8, np.float32)
    kern = build(lowered([A, S], body), rt)
    for _ in range(20):
        kern(a, s)
        np.testing.assert_allclose(s, a.sum(1), rtol=1e-4)
    assert ("explorer_gomp_launcher" if rt == "gomp" else "explorer_parallel_launch") \
        in kern.llvm_ir
    assert len(os.listdir("/proc/self/task")) >= 2


@pytest.mark.parametrize("rt", RUNTIMES)
def test_parallel_inside_serial_loop_captures_outer_var(rt):
    A, B = Buffer("A", (5, 6, 16)), Buffer("B", (5, 6, 16))
    inner = For(j, 6, For(v, 16, BufferStore(B, Add(A[t, j, v], Mul(Cast("float32", t),
                                                                      Cast("float32", j))),
                                             (t, j, v)), "vectorized"), "parallel")
    body = For(t, 5, seq([inner, For(j, 6, For(v, 16, BufferStore(
        B, Mul(B[t, j, v], F(2)), (t, j, v)), "vectorized"))]))
    a = np.random.rand(5, 6, 16).astype(np.float32)
    b = np.zeros_like(a)
    build(lowered([A, B], body), rt)(a, b)
    tt, jj = np.meshgrid(np.arange(5), np.arange(6), indexing="ij")
    np.testing.assert_allclose(b, 2 * (a + (tt * jj)[..., None]), rtol=1e-6)


@pytest.mark.parametrize("rt", RUNTIMES)
def test_nested_parallel_runs_serially_inside(rt):
    A, B = Buffer("A", (4, 6)), Buffer("B", (4, 6))
    body = For(i, 4, For(j, 6, BufferStore(B, Sub(A[i, j], F(1)), (i, j)), "parallel"),
               "parallel")
    a = np.random.rand(4, 6).astype(np.float32)
    b = np.zeros_like(a)
    kern = build(lowered([A, B], body), rt)
    kern(a, b)
    np.testing.assert_allclose(b, a - 1)
    assert kern.llvm_ir.count("_task(") <= 2   # one outlined loop: the inner one is serial


@pytest.mark.parametrize("rt", RUNTIMES)
def test_parallel_with_guard_local_and_large_buffers(rt):
    """Per-thread stack buffer and per-thread heap buffer (> 64 KB) inside the body."""
    n = 10
    A, B = Buffer("A", (n, 32)), Buffer("B", (n, 32))
    L = Buffer("L", (32,), scope="local")
    H = Buffer("H", (20000,), scope="global")
    io, ii = Var("io"), Var("ii")
    row = Add(Mul(io, C(4)), ii)
    work = seq([
        For(v, 32, BufferStore(L, Mul(A[row, v], F(3)), (v,)), "vectorized"),
        For(j, 32, BufferStore(H, L[j], (Mul(j, C(600)),))),
        For(v, 32, BufferStore(B, Add(L[v], H[Mul(Sub(C(31), v), C(600))]), (row, v)))])
    body = For(io, 3, Allocate(H, For(ii, 4, IfThenElse(LT(row, C(n)), Allocate(L, work)))),
               "parallel")
    a = np.random.rand(n, 32).astype(np.float32)
    b = np.zeros_like(a)
    kern = build(lowered([A, B], body), rt)
    kern(a, b)
    np.testing.assert_allclose(b, 3 * a + 3 * a[:, ::-1], rtol=1e-6)
    assert "aligned_alloc" in kern.llvm_ir


@pytest.mark.parametrize("rt", RUNTIMES)
def test_two_parallel_stages_share_a_root_buffer(rt):
    """Pack B in parallel into a root intermediate, then a register-blocked gemm."""
    M = N = K = 64
    A, Bm, Cm = Buffer("A", (M, K)), Buffer("B", (K, N)), Buffer("C", (M, N))
    Bp = Buffer("Bp", (N // 32, K, 32))
    Cl = Buffer("Cl", (4, 32), scope="local")
    io, jo, ii, jj, pc = (Var(n) for n in ("io", "jo", "ii", "jj", "pc"))
    col = Add(Mul(jj, C(16)), v)

    def tile(st):
        return For(ii, 4, For(jj, 2, For(v, 16, st, "vectorized"), "unrolled"), "unrolled")
    row = Add(Mul(io, C(4)), ii)
    pack = For(jo, N // 32, For(k, K, For(pc, 32, BufferStore(
        Bp, Bm[k, Add(Mul(jo, C(32)), pc)], (jo, k, pc)), "vectorized")), "parallel")
    gemm = For(io, M // 4, For(jo, N // 32, Allocate(Cl, seq([
        tile(BufferStore(Cl, F(0), (ii, col))),
        For(k, K, tile(BufferStore(Cl, Add(Cl[ii, col], Mul(A[row, k], Bp[jo, k, col])),
                                   (ii, col)))),
        tile(BufferStore(Cm, Cl[ii, col], (row, Add(Mul(jo, C(32)), col))))]))), "parallel")
    f = lowered([A, Bm, Cm], Allocate(Bp, seq([pack, gemm])))
    a = np.random.rand(M, K).astype(np.float32)
    b = np.random.rand(K, N).astype(np.float32)
    for cores in (1, 2):
        c = np.zeros((M, N), np.float32)
        build(f, rt, cores)(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4)


def test_kernel_called_from_several_python_threads():
    A, B = Buffer("A", (16, 64)), Buffer("B", (16, 64))
    body = For(i, 16, For(v, 64, BufferStore(B, Mul(A[i, v], A[i, v]), (i, v)), "vectorized"),
               "parallel")
    kern = build(lowered([A, B], body), RUNTIMES[0])
    errors = []

    def work(seed):
        a = np.random.default_rng(seed).random((16, 64), dtype=np.float32)
        b = np.zeros_like(a)
        for _ in range(50):
            kern(a, b)
            if not np.allclose(b, a * a):
                errors.append(seed)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


@pytest.mark.skipif("gomp" not in RUNTIMES, reason="needs libgomp")
def test_forked_child_runs_parallel_kernels_serially_instead_of_hanging():
    """libgomp cannot run a team in a child forked after the parent used one."""
    import multiprocessing as mp
    A = Buffer("A", (4, 16))
    body = For(i, 4, For(v, 16, BufferStore(A, Add(A[i, v], F(1)), (i, v)), "vectorized"),
               "parallel")
    kern = build(lowered([A], body), "gomp")
    a = np.zeros((4, 16), np.float32)
    kern(a)
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_run_in_child, args=(kern, queue))
    child.start()
    child.join(60)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive, "the forked child hung in the parallel runtime"
    assert queue.get(timeout=5) == 4 * 16 * 2.0


def _run_in_child(kern, queue):
    b = np.ones((4, 16), np.float32)
    kern(b)
    queue.put(float(b.sum()))


_BOUND_SCRIPT = r"""
import json, os, sys
import numpy as np
sys.path.insert(0, os.getcwd())
from explorer.backends.llvm import build_llvm, runtime
from explorer.target import Target
from explorer.ir.expr import Add, Buffer, FloatImm, Var
from explorer.ir.stmt import BufferStore, For, PrimFunc

def pinned():
    out = {}
    for t in os.listdir("/proc/self/task"):
        for line in open(f"/proc/self/task/{t}/status"):
            if line.startswith("Cpus_allowed_list"):
                out[int(t)] = line.split(":")[1].strip()
    return out

i, v = Var("i"), Var("v")
A = Buffer("A", (64, 16))
body = For(i, 64, For(v, 16, BufferStore(A, Add(A[i, v], FloatImm(1.0)), (i, v)),
                      "vectorized"), "parallel")
f = PrimFunc("par", (A,), body, (), (("lowered", True),))
kern = build_llvm(f, f, Target("llvm -num-cores=2"), "gomp")
a = np.zeros((64, 16), np.float32)
kern(a)
cpus = sorted(os.sched_getaffinity(0))
with runtime.bound_team(1) as one:
    single = (one.bound, sorted(os.sched_getaffinity(0)) == cpus)
with runtime.bound_team(2) as team:
    inside = sorted(os.sched_getaffinity(0))
    threads = pinned()
    for _ in range(50):
        kern(a)
after = sorted(os.sched_getaffinity(0))
total = float(a.sum())
from explorer.measure.config import RunConfig
from explorer.measure.timing import time_call
seen = []
def call():
    kern(a)
    seen.append(sorted(os.sched_getaffinity(0)))
times = time_call(call, RunConfig(repeats=2, min_repeat_secs=0.001), threads=2)
print(json.dumps({"cpus": cpus, "bound": team.bound, "single": single, "inside": inside,
                  "threads": threads, "after": after, "sum": total,
                  "timed": sorted({tuple(x) for x in seen}), "times": len(times),
                  "calls": len(seen), "timed_sum": float(a.sum()),
                  "after_timed": sorted(os.sched_getaffinity(0))}))
"""


@pytest.mark.skipif(not runtime.gomp_available(), reason="needs libgomp")
def test_bound_team_pins_one_thread_a_core_and_frees_the_master_after():
    """A timed kernel's team gets one core a thread (runtime.bound_team: a woken team
    thread queued behind its spinning master made calls 200x slow); the kernel stays
    correct, the master gets its affinity back, and one thread or one core is left
    alone. In a fresh interpreter: the test process's own team is not touched."""
    import json
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _BOUND_SCRIPT], capture_output=True,
                         text=True, timeout=120, cwd=str(__import__("pathlib").Path(
                             __file__).parents[1]))
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["sum"] == 51 * 64 * 16       # 1 + 50 runs, each adding 1: still correct
    assert r["single"] == [False, True]    # one thread: nothing pinned
    assert r["after"] == r["cpus"] and r["after_timed"] == r["cpus"]
    # time_call (demos, benchmarks: timing in this process) binds the team the same way
    assert r["times"] == 2 and r["timed_sum"] == r["sum"] + r["calls"] * 64 * 16
    if len(r["cpus"]) < 2:
        assert r["bound"] is False and r["inside"] == r["cpus"]
        assert r["timed"] == [r["cpus"]]
        return
    assert r["timed"] == [[r["cpus"][0]]]
    assert r["bound"] is True
    assert r["inside"] == [r["cpus"][0]]   # the master: the first core of its affinity
    # the team's other thread sits on the second core
    assert str(r["cpus"][1]) in r["threads"].values()
