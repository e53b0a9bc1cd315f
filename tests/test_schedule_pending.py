"""Pending loop kinds: ``parallel``, ``vectorize`` and ``unroll`` change no loop or block, so
the schedule applies them with the pending annotations, when its function is next asked
for (one rebuild for a run of them, as postprocessing unrolls loop after loop). The
functions, traces and errors are those of applying each primitive at once."""
import pytest

from explorer import Schedule, ScheduleError, build, ops
from explorer.schedule import loop_prims
from explorer.schedule.trace import replay
from explorer.schedule.tree import set_annotations
from explorer.space import DesignSpace


def checked(sch, wl):
    """Run ``sch`` on the interpreter and compare with numpy; return it."""
    args = wl.make_args(seed=0)
    build(sch, "interp")(*args)
    wl.check(args)
    return sch


def gemm():
    return ops.get("gemm", M=16, N=12, K=8)


def test_kinds_and_annotations_wait_and_give_the_function_of_each_at_once():
    wl = gemm()
    sch = Schedule(wl, seed=0)
    b = sch.get_block("C")
    i, j, k = sch.get_loops(b)
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(i, jo, k, ji)
    start = sch.func
    sch.parallel(i)
    sch.unroll(k)
    sch.annotate(jo, "pragma_auto_unroll_max_step", 16)
    sch.unroll(jo)
    sch.parallel(jo)          # the last kind asked for wins, as it did one call at a time
    sch.vectorize(ji)
    names = [sch.get(x) for x in (i, jo, k, ji)]
    # one primitive at a time, each function built from the one before
    want = loop_prims.parallel(start, names[0])
    want = loop_prims.unroll(want, names[2])
    want = set_annotations(want, {("loop", names[1]): {
        "annotations": (("pragma_auto_unroll_max_step", 16),)}})
    want = loop_prims.unroll(want, names[1])
    want = loop_prims.parallel(want, names[1])
    want = loop_prims.vectorize(want, names[3])
    assert sch.func == want
    kinds = {lp.var.name: lp.kind for lp in _loops(sch.func)}
    assert [kinds[n] for n in names] == ["parallel", "parallel", "unrolled", "vectorized"]
    assert [ins.kind for ins in sch.trace.insts][-6:] == [
        "parallel", "unroll", "annotate", "unroll", "parallel", "vectorize"]
    again = Schedule(wl, seed=0)
    replay(sch.trace, again)
    assert again.func == sch.func
    checked(sch, wl)


def _loops(func):
    from explorer.ir.functor import iter_nodes
    from explorer.ir.stmt import For
    return [n for n in iter_nodes(func.body) if type(n) is For]


@pytest.mark.parametrize("prepare, prim, match", [
    (lambda s, lp: s.bind(lp[0], "blockIdx.x"), "vectorize",
     "vectorized: loop 'i' is bound to blockIdx.x; a bound loop keeps its binding"),
    (lambda s, lp: s.bind(lp[0], "blockIdx.x"), "unroll",
     "unrolled: loop 'i' is bound to blockIdx.x; a bound loop keeps its binding"),
    (lambda s, lp: s.bind(lp[0], "blockIdx.x"), "parallel",
     "parallel: loop 'i' is bound to blockIdx.x; a bound loop keeps its binding"),
])
def test_a_bound_loop_keeps_its_binding_with_kinds_pending(prepare, prim, match):
    wl = gemm()
    sch = Schedule(wl, seed=0)
    loops = sch.get_loops(sch.get_block("C"))
    prepare(sch, loops)
    sch.unroll(loops[2])                 # pending when the bad call comes
    before_len = len(sch.trace)
    with pytest.raises(ScheduleError, match=match):
        getattr(sch, prim)(loops[0])
    assert len(sch.trace) == before_len
    kinds = {lp.var.name: lp.kind for lp in _loops(sch.func)}
    assert kinds == {"i": "thread", "j": "serial", "k": "unrolled"}
    checked(sch, wl)


@pytest.mark.parametrize("prim, match", [
    ("vectorize", "vectorize: loop 'k' is a reduction loop of block 'C'; its iterations "
                  "carry a dependence through the accumulator"),
    ("parallel", "parallel: loop 'k' is a reduction loop of block 'C'; running its "
                 "iterations at once would race on the accumulator"),
])
def test_reduction_loops_refused_with_kinds_pending(prim, match):
    wl = gemm()
    sch = Schedule(wl, seed=0)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    sch.annotate(k, "pragma_auto_unroll_max_step", 8)
    before_len = len(sch.trace)
    with pytest.raises(ScheduleError, match=match):
        getattr(sch, prim)(k)
    assert len(sch.trace) == before_len
    assert [lp.kind for lp in _loops(sch.func)] == ["parallel", "serial", "serial"]
    checked(sch, wl)


def _one_at_a_time(trace, wl):
    """``trace`` replayed with the function asked for before every instruction: each
    kind and annotation applied as it comes, as before they waited."""
    sch = Schedule(wl, seed=0)
    replay(trace, sch, before=lambda *_: sch.func)
    return sch


@pytest.mark.parametrize("wl", [
    ops.get("gemm", M=32, N=48, K=16),
    ops.get("conv2d", N=1, C=4, H=6, W=6, K=8, R=3, S=3, padding=1),
], ids=["gemm", "conv2d"])
def test_postprocessed_candidates_match_one_primitive_at_a_time(wl):
    space = DesignSpace(wl, "llvm")
    got = space.sample(4, seed=3)
    assert len(got) == 4
    for sch in got:
        kinds = {lp.kind for lp in _loops(sch.func)}
        assert kinds & {"parallel", "vectorized", "unrolled"}, sch.func.script()
        assert _one_at_a_time(sch.trace, wl).func == sch.func
        checked(sch, wl)
