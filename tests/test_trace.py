"""Traces: JSON round trip, replay, changed decisions, seeds, and bad input."""
import json

import numpy as np
import pytest

from explorer import (ArgumentError, ExplorerError, Schedule, Trace, TraceError, build, ops, te)


def sampled_schedule(seed):
    wl = ops.get("gemm", M=16, N=12, K=8)
    sch = Schedule(wl, seed=seed)
    b = sch.get_block("C")
    i, j, k = sch.get_loops(b)
    fi = sch.sample_perfect_tile(i, 3, max_innermost_factor=8)
    fj = sch.sample_perfect_tile(j, 2, max_innermost_factor=8)
    i0, i1, i2 = sch.split(i, fi)
    j0, j1 = sch.split(j, fj)
    sch.reorder(i0, j0, k, i1, i2, j1)
    u = sch.sample_categorical([0, 16, 64], [0.2, 0.4, 0.4])
    sch.annotate(i0, "pragma_auto_unroll_max_step", u)
    sch.vectorize(j1)
    return wl, sch


def test_json_round_trip_and_replay():
    wl, sch = sampled_schedule(7)
    data = sch.trace.as_json()
    assert data["version"] == 1
    assert json.loads(json.dumps(data)) == data  # plain JSON
    t = Trace.from_json(json.dumps(data))
    assert t.as_json() == data
    again = t.apply_to(Schedule(wl, seed=123))  # decisions fixed: the seed does not matter
    assert again.func == sch.func
    args = wl.make_args(0)
    build(again, "interp")(*args)
    wl.check(args)


def test_same_seed_same_trace_and_different_seeds_differ():
    traces = {s: sampled_schedule(s)[1].trace.as_json() for s in range(6)}
    assert sampled_schedule(3)[1].trace.as_json() == traces[3]
    assert len({json.dumps(t) for t in traces.values()}) > 1


def test_replay_resamples_unset_decisions_from_the_seed():
    wl, sch = sampled_schedule(1)
    t = sch.trace
    idx = t.sampling_indices()
    stripped = t
    for i in idx:
        stripped = stripped.with_decision(i, None)
    a = stripped.apply_to(Schedule(wl, seed=5))
    b = stripped.apply_to(Schedule(wl, seed=5))
    assert a.func == b.func and a.trace.as_json() == b.trace.as_json()
    assert all(i in a.trace.decisions for i in idx)


def test_with_decision_changes_the_schedule():
    wl, sch = sampled_schedule(2)
    first = sch.trace.sampling_indices()[0]
    t = sch.trace.with_decision(first, [1, 2, 8])
    s2 = t.apply_to(Schedule(wl))
    assert "i_2 in range(8)" in s2.script()
    args = wl.make_args(1)
    build(s2, "interp")(*args)
    wl.check(args)
    with pytest.raises(TraceError, match="not a sampling instruction"):
        sch.trace.with_decision(0, 3)


def test_python_form_is_replayable():
    wl, sch = sampled_schedule(4)
    lines = sch.trace.as_python()
    assert any(line.startswith("v") and "sample_perfect_tile(loop=l" in line and "decision=[" in line
               for line in lines)
    s2 = Schedule(wl)
    exec("\n".join(lines), {"sch": s2})
    assert s2.func == sch.func


GOOD = sampled_schedule(0)[1].trace.dumps()


@pytest.mark.parametrize("text,match", [
    (GOOD[: len(GOOD) // 2], "malformed or truncated"),
    ("[]", "a trace is a JSON object"),
    (json.dumps({"version": 9, "insts": []}), "unknown trace version 9"),
    (json.dumps({"version": 1, "insts": [["explode", [], {}, []]]}), "unknown instruction 'explode'"),
    (json.dumps({"version": 1, "insts": [["get_loops", ["$b0"], {}, ["l1"]]]}),
     "uses 'b0' before it is defined"),
    (json.dumps({"version": 1, "insts": [["get_block", ["C"], {}, ["b0", "b0"]]]}),
     "bad or repeated output name"),
    (json.dumps({"version": 1, "insts": [["get_block", ["C"], {}]]}),
     "must be \\[kind, inputs, attrs, outputs\\]"),
    (json.dumps({"version": 1, "insts": [["get_block", [{"x": 1}], {}, ["b0"]]]}),
     "is not a plain JSON value"),
    (json.dumps({"version": 1, "insts": [["get_block", ["C"], {}, ["b0"]]],
                 "decisions": [[0, 1]]}), "does not name a sampling instruction"),
    (json.dumps({"version": 1, "insts": "x"}), "must be lists"),
])
def test_bad_trace_json(text, match):
    with pytest.raises(TraceError, match=match):
        Trace.from_json(text)


def test_bad_decision_type_and_wrong_function():
    data = json.loads(GOOD)
    idx = data["decisions"][0][0]
    data["decisions"][0][1] = "many"
    with pytest.raises(TraceError, match="wrong type for sample_perfect_tile"):
        Trace.from_json(data)
    t = Trace.from_json(GOOD)
    with pytest.raises(ExplorerError, match="block 'C' is not in the function"):
        t.apply_to(Schedule(ops.get("softmax", M=3, N=4)))
    other = ops.get("gemm", M=15, N=12, K=8)  # 15 has other factors: the decision no longer fits
    with pytest.raises(ExplorerError, match="is not 3 positive factors of 15"):
        t.apply_to(Schedule(other))
    assert idx >= 0


def test_nothing_is_unpickled_or_evaluated():
    payload = json.dumps({"version": 1, "insts": [["get_block", ["__import__('os')"], {}, ["b0"]]]})
    t = Trace.from_json(payload)  # a string stays a string
    with pytest.raises(ExplorerError, match="is not in the function"):
        t.apply_to(Schedule(ops.get("gemm", M=4, N=4, K=4)))


@pytest.mark.parametrize("bad,match", [
    (lambda a, b, c: (a, b), "takes 3 arrays \\(A, B, C\\) but got 2"),
    (lambda a, b, c: (a.T.copy(), b, c), "argument A has shape \\(8, 16\\)"),
    (lambda a, b, c: (a.astype(np.float64), b, c), "argument A has dtype float64, expected float32: use .astype"),
    (lambda a, b, c: (a, b, np.zeros((12, 16), "float32").T), "is not C-contiguous"),
    (lambda a, b, c: ([[1.0]], b, c), "must be a numpy array, not list"),
])
def test_kernel_argument_errors(bad, match):
    wl = ops.get("gemm", M=16, N=12, K=8)
    k = build(Schedule(wl), "interp")
    a, b, c = wl.make_args(0)
    with pytest.raises(ArgumentError, match=match):
        k(*bad(a, b, c))


def test_te_errors_say_what_to_fix():
    A = te.placeholder((4, 4), "float32", "A")
    with pytest.raises(ExplorerError, match="has 2 dimensions but was indexed with 1"):
        te.compute((4,), lambda i: A[i], "B")
    with pytest.raises(ExplorerError, match="fcompute takes 1 arguments but the shape has 2"):
        te.compute((4, 4), lambda i: A[i, i], "B")
    with pytest.raises(ExplorerError, match="unknown dtype 'float16'"):
        te.placeholder((4,), "float16", "X")
    with pytest.raises(ExplorerError, match="must be a non-empty tuple of positive ints"):
        te.placeholder((4, 0), "float32", "X")
    with pytest.raises(ExplorerError, match="dtype mismatch in Add: float32 and int32"):
        I = te.placeholder((4,), "int32", "I")
        te.compute((4,), lambda i: A[i, i] + I[i], "B")
    B = te.compute((4, 4), lambda i, j: A[i, j] * 2.0, "B")
    with pytest.raises(ExplorerError, match="placeholder A is used but not passed"):
        te.create_func([B])
    A2 = te.placeholder((4, 4), "float32", "A")
    C = te.compute((4, 4), lambda i, j: A2[i, j] + B[i, j], "C")
    with pytest.raises(ExplorerError, match="two different tensors are named 'A'"):
        te.create_func([A, A2, C])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_te_dtypes_run(dtype):
    A = te.placeholder((5, 3), dtype, "A")
    k = te.reduce_axis(3, "k")
    S = te.compute((5,), lambda i: te.sum(A[i, k] * A[i, k], axis=k), "S")
    M = te.compute((5,), lambda i: te.max(S[i], te.cast(dtype, 1)), "M")
    f = te.create_func([A, M])
    a = (np.arange(15).reshape(5, 3) - 7).astype(dtype)
    m = np.zeros(5, dtype)
    build(f, "interp")(a, m)
    want = np.maximum((a.astype(np.float64) ** 2).sum(1), 1).astype(dtype)
    np.testing.assert_allclose(m, want, rtol=1e-6)


def test_cuda_without_bindings_or_pycuda_says_what_to_do(tmp_path):
    from explorer import BuildError
    from explorer.backends.cuda.runtime import driver
    from explorer.tune import Tuner
    wl = ops.get("gemm", 8, 8, 8)
    with pytest.raises(BuildError, match="no loop is bound to blockIdx/threadIdx"):
        build(Schedule(wl), "cuda")
    try:
        driver()
        pytest.skip("pycuda and a driver are installed here: tuning on cuda can run")
    except BuildError:
        pass
    with pytest.raises(BuildError, match="pycuda is not installed|driver"):
        Tuner(wl, "cuda", trials=2, database=tmp_path)
    assert not (tmp_path / "records.jsonl").exists()  # nothing half-written
