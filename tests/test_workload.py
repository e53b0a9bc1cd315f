"""Workloads: an operator plus what checks it, as JSON and back (every library op, and a
user's own); bad JSON refused with errors that say what is wrong; a user's operators
(a 2-D 5-point stencil, a fused matmul + bias + GELU), not in ops, tuned through the
worker pool, stored, and replayed from the database in a fresh process."""
import copy
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from explorer import Schedule, Workload, WorkloadError, build, ops, te
from explorer.database import Database
from explorer.errors import DatabaseError, ExplorerError, MeasureError
from explorer.measure import Measurer, MeasureInput, RunConfig
from explorer.measure.expected import expected_file, load_expected
from explorer.space import DesignSpace, ScheduleRule
from explorer.tune import Tuner
from explorer.workload import count_flops

TESTS = os.path.dirname(os.path.abspath(__file__))
FAST = RunConfig(repeats=1, min_repeat_secs=0.001, warmup=0)


# ------------------------------------------------------------------ a user's operators

def stencil5_np(a):
    return a[1:-1, 1:-1] * 4 - a[:-2, 1:-1] - a[2:, 1:-1] - a[1:-1, :-2] - a[1:-1, 2:]


def gelu_np(x, w, bias):
    y = x.astype(np.float64) @ w + bias
    return 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y ** 3)))


NUMPY = {"user:stencil5": stencil5_np, "user:matmul_bias_gelu": gelu_np}


def stencil5_te(H=32, W=48):
    A = te.placeholder((H + 2, W + 2), "float32", "A")
    B = te.compute((H, W), lambda i, j: A[i + 1, j + 1] * 4 - A[i, j + 1] - A[i + 2, j + 1]
                   - A[i + 1, j] - A[i + 1, j + 2], "stencil")
    return [A, B]


def gelu_te(M=16, N=32, K=16):
    X = te.placeholder((M, K), "float32", "X")
    W = te.placeholder((K, N), "float32", "W")
    bias = te.placeholder((N,), "float32", "bias")
    k = te.reduce_axis(K, "k")
    mm = te.compute((M, N), lambda i, j: te.sum(X[i, k] * W[k, j], axis=k), "matmul")

    def gelu(y):
        return 0.5 * y * (1 + te.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y * y * y)))
    out = te.compute((M, N), lambda i, j: gelu(mm[i, j] + bias[j]), "gelu")
    return [X, W, bias, out]


def user_workload(which: str, with_numpy: bool) -> Workload:
    tensors, name = ((stencil5_te(), "stencil5") if which == "stencil"
                     else (gelu_te(), "matmul_bias_gelu"))
    return Workload.from_te(tensors, NUMPY[f"user:{name}"] if with_numpy else None, name=name)


class TileStencil(ScheduleRule):
    """The default rules leave a purely spatial block untiled (one program: MetaSchedule
    tiles reductions only), so the stencil's space gains sampled 2 x 3 level tiles."""

    def apply(self, sch, block):
        if sch.get(block) != "stencil":
            return [sch]
        i, j = sch.get_loops(block)
        io, ii = sch.split(i, sch.sample_perfect_tile(i, 2))
        j0, j1, j2 = sch.split(j, sch.sample_perfect_tile(j, 3))
        sch.reorder(io, j0, ii, j1, j2)
        return [sch]


def _ran_naive(wl, seed=3) -> list:
    args = wl.make_args(seed)
    build(wl.func, "llvm")(*args)
    return args


# ------------------------------------------------------------------ JSON round trips

LIBRARY = [(name, spec.small) for name, spec in ops.registry.items()] + [
    ("gemm", dict(M=5, N=6, K=7, transpose_a=True, transpose_b=True, dtype="float64")),
    ("gemm", dict(M=4, N=4, K=3, dtype="int32")),
    ("conv2d", dict(N=1, C=2, H=7, W=6, K=3, R=3, S=2, stride=(1, 2), padding=(1, 0),
                    dilation=(2, 1), layout="NHWC")),
    ("softmax", dict(M=3, N=5, dtype="float64")),
]


@pytest.mark.parametrize("name,kw", LIBRARY)
def test_every_library_op_round_trips_through_json(name, kw):
    wl = ops.get(name, **kw)
    again = Workload.from_json(json.loads(json.dumps(wl.to_json())))
    assert again.key == wl.key and again.func == wl.func and again == wl
    assert (again.flops, again.inputs, again.outputs, again.dtype, again.params) == \
        (wl.flops, wl.inputs, wl.outputs, wl.dtype, wl.params)
    assert again.library and again.default_tolerance() == wl.default_tolerance()
    args = _ran_naive(wl)
    assert again.check(args) == wl.check(args)
    assert count_flops(wl.func) == wl.flops         # the te count agrees with the library's


@pytest.mark.parametrize("which", ["stencil", "gelu"])
@pytest.mark.parametrize("with_numpy", [True, False])
def test_user_workloads_round_trip_through_json(which, with_numpy):
    wl = user_workload(which, with_numpy)
    assert wl.key.startswith(wl.name + "#") and not wl.library
    assert wl.checked_by == ("numpy" if with_numpy else "program")
    text = wl.dumps()
    ref = NUMPY[wl.name] if with_numpy else None
    again = Workload.from_json(text, reference=ref)
    assert again.key == wl.key and again.func == wl.func and again.flops == wl.flops
    assert again.checked_by == wl.checked_by and again.default_tolerance() == \
        wl.default_tolerance()
    args = _ran_naive(wl)
    assert again.check(args) == wl.check(args) < 1e-3
    bad = [a.copy() for a in args]
    bad[-1][1, 2] += 0.5
    for w in (wl, again):
        with pytest.raises(MeasureError, match=r"is wrong: max abs error 0.5 at index \(1, 2\)"):
            w.check(bad)
    if with_numpy:   # the function does not travel: loaded without it, the workload says so
        bare = Workload.from_json(text)
        assert bare.key == wl.key and bare.checked_by == "numpy"
        with pytest.raises(WorkloadError, match=r"with_reference\(fn\)"):
            bare.check(args)
        assert bare.with_reference(None).check(args) < 1e-3


def test_flops_of_a_user_operator_are_counted_from_its_expression():
    assert user_workload("stencil", True).flops == 5 * 32 * 48        # 1 mul, 4 sub
    # matmul 2MNK; then 0.5*y*(1+tanh(c*(y+0.044715*y*y*y))), 9 operations, with
    # y = matmul + bias written out at each of its 5 uses (the tree as written)
    assert user_workload("gelu", True).flops == 2 * 16 * 32 * 16 + 16 * 32 * (9 + 5)
    A = te.placeholder((3, 5), "float32", "A")
    copy_wl = Workload.from_te([A, te.compute((5, 3), lambda i, j: A[j, i], "B")])
    assert copy_wl.flops == 15                      # no arithmetic: one per element written


def test_a_user_reference_and_tolerance_are_checked():
    A = te.placeholder((4, 4), "float32", "A")
    B = te.compute((4, 4), lambda i, j: A[i, j] * 2, "B")
    wl = Workload.from_te([A, B], lambda a: (a * 2)[:3], tolerance=(0, 1e-6))
    assert wl.default_tolerance() == (0.0, 1e-6)
    with pytest.raises(WorkloadError, match=r"returned output B of shape \(3, 4\), expected "
                       r"\(4, 4\)"):
        wl.check(_ran_naive(wl))
    with pytest.raises(WorkloadError, match="tolerance .* must be a pair"):
        Workload.from_te([A, B], tolerance=(1e-5,))
    with pytest.raises(WorkloadError, match="reference must be a function"):
        Workload.from_te([A, B], reference=np.zeros(3))
    with pytest.raises(WorkloadError, match="list the inputs first"):
        Workload.from_te([B, A])


# ------------------------------------------------------------------ bad JSON

def _good() -> dict:
    return user_workload("gelu", False).to_json()


def _set(path: str, value):
    def edit(d):
        *keys, last = path.split(".")
        for k in keys:
            d = d[int(k)] if isinstance(d, list) else d[k]
        if value is _DELETE:
            del d[last]
        elif isinstance(d, list):
            d[int(last)] = value
        else:
            d[last] = value
    return edit


_DELETE = object()


def _first_block(d):
    """The matmul block, under its loops i, j, k."""
    return d["func"]["body"]["seq"][0]["body"]["body"]["body"]["block"]


def _deep(d):
    e = ["var", "v_i", "int32"]
    for _ in range(400):
        e = ["add", e, ["int", 1, "int32"]]
    _first_block(d)["body"]["indices"][0] = e


BAD = [
    ("not json", lambda d: "{'workload': 1", "not valid JSON"),
    ("a list", lambda d: [d], "expected an object, got list"),
    ("version", _set("workload", 2), "unknown version 2"),
    ("missing func", _set("func", _DELETE), "missing func"),
    ("unknown field", _set("code", "__import__('os')"), "unknown code"),
    ("checked_by", _set("checked_by", "pickle"), "checked_by 'pickle' is not one of"),
    ("tolerance", _set("tolerance", [1e-5, -1]), "tolerance .* must be a pair"),
    ("shape", _set("func.buffers.0.shape", [16, 0]), "buffers\\[0\\].shape: expected an int "
     "from 1"),
    ("dims", _set("func.buffers.0.shape", [1] * 9), "expected 1 to 8 items, got 9"),
    ("huge", _set("func.buffers.0.shape", [2 ** 20, 2 ** 20]), "more than 268435456 elements"),
    ("dtype", _set("func.buffers.0.dtype", "object"), "expected one of float32"),
    ("param", _set("func.params.0", "nope"), "'nope' is not a declared buffer"),
    ("tag", lambda d: _first_block(d)["body"].__setitem__("value", ["eval", "1+1"]),
     "unknown expression tag 'eval'"),
    ("unbound var", lambda d: _first_block(d)["body"]["indices"].__setitem__(
        0, ["var", "i", "int32"]), "variable 'i' is not bound here"),
    ("dtype mix", lambda d: _first_block(d)["body"].__setitem__(
        "value", ["add", ["float", 1.0, "float32"], ["int", 1, "int32"]]),
     "operands must have one dtype"),
    ("indices", lambda d: _first_block(d)["body"]["indices"].pop() and None,
     "expected 2 to 2 items, got 1"),
    ("deep", _deep, "nested deeper than 200 levels"),
    ("not a statement", _set("func.body", [1, 2]), "expected a statement"),
    ("key", _set("key", "user:matmul_bias_gelu#000000000000"), "it says key"),
    ("flops", _set("flops", 1), "it says flops 1 but its function gives"),
    ("library op", lambda d: {**ops.gemm(4, 4, 4).to_json(), "library": {"op": "rm -rf",
                                                                         "params": {}}},
     "the library cannot build it: unknown operator 'rm -rf'"),
    ("library func", lambda d: {**ops.gemm(4, 4, 4).to_json(), "func": d["func"]},
     "not the one ops builds for gemm"),
]


@pytest.mark.parametrize("what,edit,message", BAD, ids=[b[0] for b in BAD])
def test_bad_workload_json_is_refused_with_a_clear_error(what, edit, message):
    d = copy.deepcopy(_good())
    out = edit(d)
    data = d if out is None else out
    with pytest.raises(WorkloadError, match=message) as info:
        Workload.from_json(data)
    assert isinstance(info.value, ExplorerError) and "workload JSON" in str(info.value)


def test_a_deeply_nested_text_is_refused_not_crashed():
    with pytest.raises(WorkloadError, match="not valid JSON|expected an object"):
        Workload.from_json("[" * 100_000 + "]" * 100_000)


# ------------------------------------------------------------------ plumbing

def test_measure_input_of_a_user_workload_is_data_with_its_expected_outputs():
    wl = user_workload("gelu", True)
    inp = MeasureInput.from_schedule(Schedule(wl), "llvm")
    again = MeasureInput.from_json(json.loads(json.dumps(inp.as_json())))
    assert again == inp and hash(again) == hash(inp) and again.workload_key == wl.key
    rebuilt = again.workload()
    assert rebuilt == wl and rebuilt.func == wl.func and rebuilt.reference_fn is None
    inputs, outputs = load_expected(again.expected, rebuilt)
    np.testing.assert_array_equal(outputs[0], wl.reference(*inputs)[0])
    assert expected_file(wl) == again.expected          # computed once per workload
    library = MeasureInput.from_schedule(Schedule(ops.gemm(4, 4, 4)), "llvm").as_json()
    assert "workload" not in library and "expected" not in library   # unchanged for ops


def test_an_altered_expected_file_is_refused(tmp_path):
    wl = user_workload("stencil", True)
    path = tmp_path / os.path.basename(expected_file(wl))
    data = bytearray(open(expected_file(wl), "rb").read())
    data[-40] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(MeasureError, match="was altered"):
        load_expected(str(path), wl)


def test_database_stores_a_user_workload_and_keeps_the_library_format(tmp_path):
    db = Database(tmp_path / "db")
    user, lib = user_workload("gelu", True), ops.gemm(8, 8, 8)
    db.commit_workload(user)
    db.commit_workload(lib)
    lines = [json.loads(x) for x in (tmp_path / "db" / "workloads.jsonl").read_text().split()]
    assert lines[1] == {"key": lib.key, "op": "gemm", "params": dict(lib.params),
                        "dtype": "float32"}
    assert json.loads(lines[0]["workload"])["func"]["name"] == "matmul_bias_gelu"
    db = Database(tmp_path / "db")
    assert db.workload(lib.key) == lib and db.workload(lib).func == lib.func
    again = db.workload(user.key, reference=gelu_np)
    assert again.func == user.func and again.checked_by == "numpy"
    args = _ran_naive(user)
    assert again.check(args) == user.check(args)
    with pytest.raises(DatabaseError, match="no workload 'gemm\\(M=1"):
        db.workload("gemm(M=1,N=1,K=1,transpose_a=False,transpose_b=False,dtype=float32)")


@pytest.fixture(scope="module")
def measurer():
    with Measurer("llvm", FAST) as m:
        yield m


def test_tuner_takes_a_primfunc_or_a_schedule(tmp_path, measurer):
    func = user_workload("gelu", False).func
    t = Tuner(func, "llvm", trials=2, database=tmp_path / "db", measurer=measurer,
              strategy="replay", cost_model=None, retime_top=0)
    assert t.workload.checked_by == "program" and t.workload.func == func
    res = t.run()
    assert res.measured == 2 and res.failed == 0 and res.best_seconds > 0
    gemm = ops.gemm(8, 8, 8)
    assert Tuner(Schedule(gemm), "llvm", trials=1).workload is gemm
    with pytest.raises(WorkloadError, match=r"Tuner takes a Workload \(ops.gemm\(64, 64, 64\), "
                       r"Workload.from_te\(\[A, B, C\], reference=...\)\), a PrimFunc or a "
                       r"Schedule, not str"):
        Tuner("gemm", "llvm")


def test_a_wrong_reference_fails_every_candidate(tmp_path, measurer):
    tensors = stencil5_te(8, 8)
    wl = Workload.from_te(tensors, lambda a: stencil5_np(a) + 1e-2, name="stencil5")
    res = Tuner(wl, "llvm", trials=3, database=tmp_path / "db", measurer=measurer,
                strategy="replay", cost_model=None, retime_top=0,
                space=DesignSpace(wl, measurer.target).add_rule(TileStencil())).run()
    recs = Database(tmp_path / "db").records(wl)
    assert res.best_seconds is None and len(recs) == 3
    assert all(r.error.startswith("wrong: user:stencil5#") for r in recs)


# ------------------------------------------------------------------ end to end

REPLAY = """
import json, sys
sys.path.insert(0, {tests!r})
from explorer import build
from explorer.database import Database
from test_workload import NUMPY
out = []
for path, key, target in json.loads(sys.argv[1]):
    db = Database(path)
    wl = db.workload(key)                       # rebuilt from the database's data alone
    sch = db.best_schedule(wl, target)
    args = wl.make_args(11)
    build(sch, "llvm")(*args)
    out.append({{"key": wl.key, "checked_by": wl.checked_by,
                "numpy": db.workload(key, reference=NUMPY[wl.name]).check(args),
                "program": wl.with_reference(None).check(args)}})
print(json.dumps(out))
"""


@pytest.mark.slow
def test_user_operators_tuned_through_workers_then_replayed_in_a_fresh_process(tmp_path,
                                                                                measurer):
    runs = []
    for which in ("stencil", "gelu"):
        for with_numpy in (True, False):
            wl = user_workload(which, with_numpy)
            space = DesignSpace(wl, measurer.target)
            if which == "stencil":
                space.add_rule(TileStencil())
            db = tmp_path / f"{which}-{with_numpy}"
            res = Tuner(wl, "llvm", trials=32, database=db, measurer=measurer, seed=1,
                        strategy="replay", cost_model=None, retime_top=0, space=space).run()
            recs = Database(db).records(wl, res.target)
            assert res.measured == 32 and len(recs) == 32
            assert all(r.ok for r in recs), [r.error for r in recs if not r.ok]
            assert len({json.dumps(r.trace, sort_keys=True) for r in recs}) == 32
            runs.append((str(db), wl.key, res.target))
    proc = subprocess.run([sys.executable, "-c", REPLAY.format(tests=TESTS), json.dumps(runs)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [o["key"] for o in out] == [key for _, key, _ in runs]
    assert [o["checked_by"] for o in out] == ["numpy", "program"] * 2
    for o in out:
        assert o["numpy"] < 1e-3 and o["program"] < 1e-3
