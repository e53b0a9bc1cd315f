"""The first population from the database's records of similar workloads (issue 17):
``Database.similar`` finds the nearest workloads of the same operator, ``adapt_trace``
carries their traces over to this workload's extents, and the evolutionary search starts
from them when the workload has no records of its own.

Every schedule these tests build is checked against numpy (on the interpreter)."""
import math

import pytest

from explorer import Target, ops
from explorer.cost_model import XGBCostModel
from explorer.database import Database, TuningRecord, shape_distance
from explorer.search import EvolutionarySearch, TuneContext
from explorer.search.transfer import adapt_trace, refit
from explorer.space import DesignSpace
from explorer.space.expert import expert_trace
from explorer.space.validate import check_on_interp

AVX512 = Target("llvm -mcpu=skylake-avx512 -num-cores=2", vector_bits=512)


def tiles(trace) -> list:
    return [trace.decisions[i] for i in trace.sampling_indices()
            if trace.insts[i].kind == "sample_perfect_tile"]


def record(wl, trace, secs: float) -> TuningRecord:
    return TuningRecord(wl.key, str(AVX512), trace.as_json(), (secs,))


def test_refit_keeps_the_inner_factors_that_divide():
    assert refit([1, 256, 1, 4], 128, 64) == [1, 32, 1, 4]
    assert refit([16, 1, 1, 64], 768, 64) == [12, 1, 1, 64]
    assert refit([2, 8], 12, 64) == [3, 4]
    assert refit([1, 1, 1, 64], 100, 16) == [25, 1, 1, 4]   # the innermost bound holds
    for old, ext in (([4, 2, 8, 16], 96), ([1, 1], 7), ([3, 5, 7], 210)):
        assert math.prod(refit(old, ext, 64)) == ext


def test_shape_distance_same_operator_other_sizes():
    a = dict(ops.gemm(512, 512, 512).params)
    assert shape_distance(a, dict(ops.gemm(1024, 1024, 1024).params)) == 3.0
    assert shape_distance(a, a) == 0.0
    b = dict(ops.gemm(512, 512, 512, transpose_b=True).params)
    assert shape_distance(a, b) is None            # another flag: another program
    assert shape_distance({"layout": "NCHW", "H": 7}, {"layout": "NHWC", "H": 7}) is None


def test_similar_records_nearest_first(tmp_path):
    db = Database(tmp_path / "db")
    mine, near, far = ops.gemm(64, 256, 32), ops.gemm(64, 128, 32), ops.gemm(16, 32, 32)
    conv = ops.conv2d(N=1, C=4, H=7, W=7, K=32, R=3, S=3, padding=1)
    space = {w.key: DesignSpace(w, AVX512) for w in (near, far, conv)}
    for wl, secs in ((near, 2.0), (near, 1.0), (far, 0.5), (conv, 0.1)):
        db.commit_workload(wl)
        sch = space[wl.key].sample(1, seed=int(secs * 10))[0]
        db.commit_record(record(wl, sch.trace, secs))
    db.commit_workload(mine)
    got = db.similar(mine, str(AVX512), k=3)
    assert [(d, r.workload, r.seconds) for d, r in got] == [
        (1.0, near.key, 1.0), (1.0, near.key, 2.0), (5.0, far.key, 0.5)]
    assert db.similar(mine, "cuda", k=3) == []
    assert db.similar(near, str(AVX512), k=9)[0][1].workload == far.key  # not itself


def test_adapted_expert_is_a_valid_schedule_of_the_new_shape():
    big, small = ops.gemm(1024, 1024, 1024), ops.gemm(48, 96, 40)
    space = DesignSpace(small, AVX512)
    src = expert_trace(big, AVX512)
    got = adapt_trace(space, src)
    assert got is not None and space.sketch_of(got) == space.sketch_of(src)
    want = [refit(d, e, 64) for d, e in zip(tiles(src), (48, 96, 40))]
    assert tiles(got) == want
    assert want[0][-1] == 4 and want[1][-1] == 32     # the register tile, where it divides
    sch = space.apply(got)
    assert sch is not None, space.last_error
    check_on_interp(sch, small)


@pytest.mark.parametrize("transfer", [True, False])
def test_first_population_starts_from_similar_records(tmp_path, transfer):
    db = Database(tmp_path / "db")
    near, mine = ops.gemm(64, 128, 32), ops.gemm(64, 256, 32)
    db.commit_workload(near)
    src = expert_trace(near, AVX512)
    db.commit_record(record(near, src, 1e-4))
    space = DesignSpace(mine, AVX512)
    ctx = TuneContext(mine, AVX512, space, XGBCostModel(seed=0), db, seed=0)
    search = EvolutionarySearch(population=16, generations=1, transfer=transfer)
    search.pre_tuning(ctx)
    pop = search._initial()
    assert len(pop) == 16
    want = tiles(adapt_trace(space, src))
    carried = [s for s in pop if tiles(s.trace) == want]
    assert bool(carried) == transfer
    if carried:
        check_on_interp(carried[0], mine)


@pytest.mark.parametrize("args", [dict(workload="gemm"), dict(k=-1), dict(k=1.5),
                                  dict(per_workload=-2)])
def test_similar_says_what_to_fix_on_bad_arguments(tmp_path, args):
    from explorer.errors import DatabaseError
    db = Database(tmp_path / "db")
    call = {"workload": ops.gemm(8, 8, 8), "target": "llvm", **args}
    with pytest.raises(DatabaseError, match="similar"):
        db.similar(**call)
