"""MutateCategorical: a child differs from its parent in one categorical decision that no
other mutator owns (the memory-bound rule's prefetch distances, streaming stores,
accumulator widths, streamed tile and run lengths), replays, and builds to the numpy
result; the unroll step stays MutateUnroll's; a split factor with which the trace no
longer replays is not proposed; the same seed gives the same child. Every schedule
built here is run with the LLVM backend and compared with numpy."""
import random

import pytest

from explorer import Schedule, Target, build, ops
from explorer.space import DesignSpace
from explorer.space.defaults import default_mutators
from explorer.space.mutators import MutateCategorical, MutateUnroll
from explorer.space.mutators.categorical import free_categoricals
from explorer.space.mutators.unroll import categorical_uses, is_unroll_step

# the host, with an L1 small enough that these small shapes count as memory-bound
HOST = Target("llvm").with_(l1_bytes=4 * 1024)
CASES = [("softmax", 16, 128), ("layer_norm", 8, 256), ("row_sum", 16, 512),
         ("transpose", 64, 96)]


def changed(a, b) -> list:
    return [k for k in set(a.decisions) | set(b.decisions)
            if a.decisions.get(k) != b.decisions.get(k)]


def _check(wl, sch):
    args = wl.make_args(0)
    build(sch, HOST)(*args)
    wl.check(args, rtol=1e-4, atol=1e-5)


def _mutator(target=HOST) -> MutateCategorical:
    m = MutateCategorical()
    m.initialize(target)
    return m


@pytest.mark.parametrize("op,M,N", CASES)
def test_a_child_changes_one_free_choice_replays_and_equals_numpy(op, M, N):
    wl = ops.get(op, M=M, N=N)
    space = DesignSpace(wl, HOST)
    rng = random.Random(0)
    kinds = set()
    for parent in space.sample(4, seed=1):
        design = space.design_trace(parent.trace)
        child = _mutator().apply(design, rng, wl)
        if not free_categoricals(design):    # the staged transpose samples tiles only
            assert child is None
            continue
        (k,) = changed(design, child)
        assert k in free_categoricals(design)
        assert child.insts == design.insts
        kinds.add(tuple(design.insts[k].inputs[0]))
        sch = space.apply(child)
        assert sch is not None, space.last_error
        _check(wl, sch)
    assert kinds


def test_the_unroll_step_stays_mutate_unrolls():
    wl = ops.softmax(16, 128)
    space = DesignSpace(wl, HOST)
    design = space.design_trace(space.sample(1, seed=2)[0].trace)
    unroll = categorical_uses(design, is_unroll_step)
    assert unroll and not set(unroll) & set(free_categoricals(design))
    rng = random.Random(3)
    for _ in range(40):
        (k,) = changed(design, _mutator().apply(design, rng, wl))
        assert k not in unroll
    (k,) = changed(design, MutateUnroll().apply(design, rng, wl))
    assert k in unroll


def test_none_where_only_owned_choices_exist():
    wl = ops.gemm(32, 32, 32)
    space = DesignSpace(wl, HOST)
    for sch in space.sample(3, seed=0):
        design = space.design_trace(sch.trace)
        assert categorical_uses(design, is_unroll_step)
        assert free_categoricals(design) == []
        assert _mutator().apply(design, random.Random(0), wl) is None


def _split_then_tile(note: bool):
    """An elementwise 64 x 64 whose rows split by a sampled 4 or 8 (4 drawn) and whose
    outer part is tiled again ([4, 4] of 16): with 8 the tiling no longer fits its loop.
    With ``note``, a second choice that only an annotation reads."""
    wl = ops.elementwise(64, 64)
    sch = Schedule(wl, seed=0)
    b = sch.get_block("C")
    i, _ = sch.get_loops(b)
    io, _ = sch.split(i, [None, sch.sample_categorical([4, 8], [0.5, 0.5], decision=0)])
    sch.split(io, sch.sample_perfect_tile(io, n=2, decision=[4, 4]))
    if note:
        sch.annotate(b, "pragma_note", sch.sample_categorical([0, 1], [0.5, 0.5], decision=0))
    return wl, sch.trace


def test_a_split_factor_that_breaks_a_later_tiling_is_not_proposed():
    wl, trace = _split_then_tile(note=True)
    split_choice, note = free_categoricals(trace)
    rng = random.Random(0)
    for _ in range(20):
        child = _mutator().apply(trace, rng, wl)
        assert changed(trace, child) == [note]
        sch = Schedule(wl, seed=0)
        child.apply_to(sch)
        _check(wl, sch)
    _, only_split = _split_then_tile(note=False)
    assert free_categoricals(only_split) == [split_choice]
    assert _mutator().apply(only_split, random.Random(1), wl) is None


def test_the_same_seed_gives_the_same_child():
    wl = ops.softmax(16, 128)
    space = DesignSpace(wl, HOST)
    design = space.design_trace(space.sample(1, seed=4)[0].trace)
    a = _mutator().apply(design, random.Random(7), wl)
    b = _mutator().apply(design, random.Random(7), wl)
    assert a.as_json() == b.as_json()
    children = {str(_mutator().apply(design, random.Random(s), wl).as_json()) for s in range(8)}
    assert len(children) > 1
    sch = space.apply(a)
    assert sch is not None, space.last_error
    _check(wl, sch)


@pytest.mark.parametrize("target", [HOST, Target("cuda")])
def test_registered_by_default_without_starving_the_tile_sizes(target):
    weights = {type(m).__name__: w for m, w in default_mutators(target)}
    assert 0 < weights["MutateCategorical"] < weights["MutateTileSize"] / 4


def test_the_default_space_mutates_the_rules_choices():
    """Through ``DesignSpace.mutate_valid`` (the search's path): on a softmax the tile
    sizes still take most children, the free categoricals some, every child valid."""
    wl = ops.softmax(16, 128)
    space = DesignSpace(wl, HOST)
    rng = random.Random(0)
    parent = space.design_trace(space.sample(1, seed=5)[0].trace)
    free = set(free_categoricals(parent))
    hits = tiles = 0
    for n in range(120):
        child, sch = space.mutate_valid(parent, rng)
        (k,) = changed(parent, child)
        hits += k in free
        tiles += parent.insts[k].kind == "sample_perfect_tile"
        if n % 40 == 0:
            _check(wl, sch)
    assert 0 < hits < tiles
