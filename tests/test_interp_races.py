"""The interpreter's race check on GPU-bound programs, and the barrier model it shares
with the CUDA generator (``explorer.backends.barriers``): every program here is also
checked against numpy."""
import numpy as np
import pytest

from explorer import Schedule, build, lower, ops
from explorer.backends.barriers import barrier_points
from explorer.backends.interp import build_interp
from explorer.errors import ExplorerError, RaceError
from explorer.ir.expr import Buffer, Var, const
from explorer.ir.stmt import Allocate, BufferStore, For, PrimFunc, SeqStmt
from explorer.space import DesignSpace

N = 8
X = Buffer("X", (N,))
Y = Buffer("Y", (N,))
S = Buffer("S", (N,), scope="shared")


def _thread(name, extent, body, tag="threadIdx.x"):
    v = Var(name)
    return For(v, extent, body(v), kind="thread", thread=tag)


def _func(block_body, params=(X, Y)) -> PrimFunc:
    body = _thread("b", 1, lambda b: Allocate(S, block_body), tag="blockIdx.x")
    return PrimFunc("neighbours", params, body, (), (("lowered", True),))


def _run(func, **kw):
    x = np.arange(N, dtype=np.float32) + 1
    y = np.full(N, np.nan, np.float32)
    build_interp(func, func, **kw)(x, y)
    return x, y


def racy() -> PrimFunc:
    """Thread t writes S[t], then reads S[t+1] (its neighbour's) with no barrier between:
    one thread loop, two plain stores, so the barrier model puts none there."""
    return _func(_thread("t", N, lambda t: SeqStmt((
        BufferStore(S, X[t] * 2.0, (t,)),
        BufferStore(Y, S[(t + 1) % N], (t,))))))


def staged() -> PrimFunc:
    """The same program as two per-thread stages of the block: a barrier goes between."""
    return _func(SeqStmt((
        _thread("t", N, lambda t: BufferStore(S, X[t] * 2.0, (t,))),
        _thread("u", N, lambda u: BufferStore(Y, S[(u + 1) % N], (u,))))))


def cooperative() -> PrimFunc:
    """The shape of a cooperative fetch: under the compute's thread loop, a nested loop of
    the same tag fills S (each thread one element: the same thread, not a second one),
    then the compute reads a neighbour's element; the barrier goes between the two."""
    return _func(_thread("t", N, lambda t: SeqStmt((
        _thread("f", N, lambda f: BufferStore(S, X[f] * 2.0, (f,))),
        BufferStore(Y, S[(t + 1) % N], (t,))))))


def test_a_hand_built_race_names_buffer_element_and_both_threads():
    assert len(barrier_points(racy())) == 0
    with pytest.raises(RaceError) as e:
        _run(racy())
    msg = str(e.value)
    assert "shared buffer S, element [1]" in msg
    assert "thread (blockIdx.x=0, threadIdx.x=1) writes it" in msg
    assert "thread (blockIdx.x=0, threadIdx.x=0) reads it" in msg
    assert "__syncthreads()" in msg
    assert isinstance(e.value, ExplorerError)


def test_the_race_check_can_be_turned_off():
    x, y = _run(racy(), check_races=False)
    # serialized threads: thread t reads S[t+1] before thread t+1 writes it (NaN)
    assert np.isnan(y[:-1]).all() and y[-1] == 2 * x[0]


@pytest.mark.parametrize("make", [staged, cooperative])
def test_the_same_program_with_its_barrier_runs_clean_and_equals_numpy(make):
    func = make()
    plan = barrier_points(func)
    assert len(plan) == 1, plan.descriptions
    x, y = _run(func)
    np.testing.assert_array_equal(y, np.roll(x * 2, -1))
    # and removed by hand, the check catches the missing barrier
    with pytest.raises(RaceError, match=r"shared buffer S, element \[1\]"):
        _run(func, barriers=plan.without(0))


def test_blocks_touching_one_global_element_race():
    """No barrier orders the blocks of a launch: two blocks writing Y[0] race."""
    body = _thread("b", 2, lambda b: _thread(
        "t", N, lambda t: BufferStore(Y, X[t], ((t + b) % N,))), tag="blockIdx.x")
    func = PrimFunc("blocks", (X, Y), body, (), (("lowered", True),))
    with pytest.raises(RaceError) as e:
        _run(func)
    assert ("global buffer Y, element [0]: thread (blockIdx.x=0, threadIdx.x=0) writes it "
            "and thread (blockIdx.x=1, threadIdx.x=7) writes it from another block"
            in str(e.value))


def test_vthreads_are_one_thread_and_locals_are_per_thread():
    """Two vthreads of one thread reuse S[t] (no race: they are one real thread); a local
    buffer allocated above the thread loops has one copy per thread (as on a GPU)."""
    L = Buffer("L", (1,), scope="local")
    Z = Buffer("Z", (2 * N,))
    W = Buffer("W", (2 * N,))
    body = _thread("b", 1, lambda b: Allocate(S, Allocate(L, _thread(
        "v", 2, lambda v: SeqStmt((
            _thread("t", N, lambda t: SeqStmt((
                BufferStore(S, Z[t + v * N] * 2.0, (t,)),
                BufferStore(L, S[t], (const(0),))))),
            _thread("u", N, lambda u: BufferStore(W, L[0] + 1.0, (u + v * N,))))),
        tag="vthread.x"))), tag="blockIdx.x")
    func = PrimFunc("vt", (Z, W), body, (), (("lowered", True),))
    z = np.arange(2 * N, dtype=np.float32)
    w = np.full(2 * N, np.nan, np.float32)
    build_interp(func, func)(z, w)
    np.testing.assert_array_equal(w, z * 2 + 1)


def _gpu_gemm_samples(n=6):
    wl = ops.get("gemm", M=64, N=64, K=32)
    found = []
    for sch, _ in DesignSpace(wl, "cuda").sample_candidates(40, seed=1):
        if sch is not None and "shared" in lower(sch).script():
            found.append(sch)
        if len(found) == n:
            break
    assert found, "the cuda space gives shared-memory gemm schedules"
    return wl, found


def test_shared_memory_gemm_from_the_cuda_space_runs_clean_and_equals_numpy():
    wl, found = _gpu_gemm_samples()
    for sch in found:
        kernel = build(sch, "interp")
        assert kernel.check_races and len(kernel.barriers) >= 1
        args = wl.make_args(0)
        kernel(*args)
        wl.check(args)


def test_a_barrier_removed_by_hand_from_a_sampled_gemm_is_caught():
    wl, found = _gpu_gemm_samples()
    sch = found[0]
    lowered = lower(sch)
    plan = barrier_points(lowered)
    for k in range(len(plan)):
        with pytest.raises(RaceError, match=r"on shared buffer [AB]\w*_shared"):
            build_interp(sch.func, lowered, barriers=plan.without(k))(*wl.make_args(0))


def test_cpu_programs_run_without_the_gpu_path():
    wl = ops.get("gemm", M=16, N=12, K=8)
    sch = Schedule(wl)
    b = sch.get_block("C")
    i, j, k = sch.get_loops(b)
    sch.split(i, [None, 4])
    kernel = build(sch, "interp")
    assert kernel.barriers is None
    assert "_run_launch" not in kernel.source and "yield" not in kernel.source
    assert "_r0" not in kernel.source
    args = wl.make_args(0)
    kernel(*args)
    wl.check(args)


def test_a_reduction_bound_to_threads_is_not_a_race():
    """Marked for a cross-thread reduction, the threads' accumulations stand for the
    reduction the code generator emits; unmarked, bind refuses the loop."""
    wl = ops.get("row_sum", M=2, N=8)
    sch = Schedule(wl)
    i, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, [None, 4])
    sch.annotate(sch.get_block("B"), "cross_thread_reduction", 1)   # as the cuda space does
    sch.bind(i, "blockIdx.x")
    sch.bind(k1, "threadIdx.x")
    args = wl.make_args(0)
    build(sch, "interp")(*args)
    wl.check(args)


def test_an_unmarked_accumulation_across_threads_is_still_a_race():
    """The exemption is the annotation's, not every reduction's: the same program with
    the loop's mark taken off (as a hand-written lowered program would be) races."""
    from explorer.ir.functor import transform_stmt
    wl = ops.get("row_sum", M=2, N=8)
    sch = Schedule(wl)
    i, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, [None, 4])
    sch.annotate(sch.get_block("B"), "cross_thread_reduction", 1)
    sch.bind(i, "blockIdx.x")
    sch.bind(k1, "threadIdx.x")
    low = lower(sch)
    unmarked = low.with_(body=transform_stmt(low.body, lambda s: s.with_(annotations=())
                                             if isinstance(s, For) and s.annotations else None))
    from explorer.backends.interp import build_interp
    with pytest.raises(RaceError, match="global buffer B"):
        build_interp(sch.func, unmarked)(*wl.make_args(0))
