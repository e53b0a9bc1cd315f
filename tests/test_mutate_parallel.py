"""MutateParallel on a multi-core target: no parallel limit that leaves cores idle while
another fills them (the search alone kept a one-thread C6 kernel that way). Every
schedule built here is checked against numpy on the interpreter."""
import random

from explorer import Target, ops
from explorer.schedule import Schedule
from explorer.schedule.tree import block_names
from explorer.space import DesignSpace
from explorer.space import analysis as A
from explorer.space.mutators import MutateParallel
from explorer.space.mutators.parallel import _plans, _prefix_products, _tasks
from explorer.space.register_tiles import register_tiles
from explorer.space.replay import replay
from explorer.space.validate import check_on_interp

FOUR = Target("llvm -mcpu=skylake-avx512 -num-cores=4", vector_bits=512)
ONE = Target("llvm -mcpu=skylake-avx512 -num-cores=1", vector_bits=512)


def _parent(target):
    """A gemm draw whose first tile level gives 2 tasks (i0 = 2, j0 = 1): the parallel
    limit 1 fuses i0 alone, a larger one fuses the next level too."""
    wl = ops.gemm(64, 256, 16)
    space = DesignSpace(wl, target)
    sk = space.sketches[0]
    (tile,) = register_tiles(sk.trace, space.func, target)
    i, j, k = sorted(tile.tiles)
    trace = space.sample(1, seed=0)[0].trace
    trace = trace if space.sketch_of(trace) == 0 else sk.trace
    trace = (space.design_trace(trace).with_decision(i, [2, 8, 1, 4])
             .with_decision(j, [1, 4, 1, 64]).with_decision(k, [2, 8]))
    return wl, space, trace


def _limits(wl, trace):
    sch = Schedule(wl, seed=0)
    replay(trace, sch)
    blocks = [n for n in block_names(sch.func)
              if A.PARALLEL in A.block_annotations(sch.func, n)]
    limits = sorted({p for n in blocks for p in _prefix_products(sch.func, n)})
    return sch.func, blocks, limits


def _tasks_under(func, blocks, limit) -> int:
    return _tasks(func, blocks, _plans(func, blocks, limit))


def _limit_of(trace):
    return next(ins.inputs[2] for ins in trace.insts
                if ins.kind == "annotate" and ins.inputs[1] == A.PARALLEL)


def test_no_limit_leaves_cores_idle_while_another_fills_them():
    wl, space, trace = _parent(FOUR)
    func, blocks, limits = _limits(wl, trace)
    few = [v for v in limits if _tasks_under(func, blocks, v) < 4]
    assert few, "the parent must offer a limit with fewer tasks than cores"
    m = MutateParallel()
    m.initialize(FOUR)
    rng = random.Random(0)
    got = {_limit_of(m.apply(trace, rng, wl)) for _ in range(40)}
    assert got and not got & set(few)
    assert all(_tasks_under(func, blocks, v) >= 4 for v in got)
    child = space.apply(m.apply(trace, rng, wl))
    assert child is not None, space.last_error
    check_on_interp(child, wl)


def test_one_core_keeps_the_limits_with_few_tasks():
    wl, space, trace = _parent(ONE)
    func, blocks, limits = _limits(wl, trace)
    m = MutateParallel()
    m.initialize(ONE)
    rng = random.Random(0)
    got = {_limit_of(m.apply(trace, rng, wl)) for _ in range(60)}
    assert got & {v for v in limits if _tasks_under(func, blocks, v) < 4}
    assert _limit_of(trace) not in got
