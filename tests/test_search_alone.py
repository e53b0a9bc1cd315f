"""Search without a hand-written seed (issue 17): CPU draws favour register tiles that fit
the target's vector registers, and before the first measurement the search ranks its
candidates by the analytic prior, spread over the sketches.

Every schedule these tests build is checked against numpy (on the interpreter)."""
import random

import numpy as np
import pytest

from explorer import Target, Workload, ops, te
from explorer.cost_model import RandomModel, XGBCostModel
from explorer.features import extract
from explorer.lower import lower
from explorer.schedule import Schedule
from explorer.schedule.sampling import perfect_tilings
from explorer.search import EvolutionarySearch, TuneContext
from explorer.search.base import analytic_prior
from explorer.space import DesignSpace
from explorer.space.expert import expert_schedule
from explorer.space.register_tiles import register_tiles, sample_register_tiles
from explorer.space.validate import check_on_interp

# every field given: the same lanes and registers on any host
AVX512 = Target("llvm -mcpu=skylake-avx512 -num-cores=2", vector_bits=512)
AVX2 = Target("llvm -mcpu=haswell -num-cores=2", vector_bits=256)


def user_contraction():
    """A user's own operator: a batched, scaled contraction the expert knows nothing of."""
    A = te.placeholder((3, 24, 20), "float32", "A")
    B = te.placeholder((20, 64), "float32", "B")
    k = te.reduce_axis(20, "k")
    C = te.compute((3, 24, 64), lambda b, i, j: te.sum(A[b, i, k] * B[k, j] * 0.5, axis=k),
                   "scaled")
    return Workload.from_te([A, B, C], lambda a, b: (a @ b) * 0.5, name="user_scaled_bmm")


def _fits(space, sch) -> bool:
    tiles = register_tiles(space.sketches[space.sketch_of(sch.trace)].trace, space.func,
                           space.target)
    return bool(tiles) and all(t.fits(sch.trace.decisions) for t in tiles)


@pytest.mark.parametrize("target, lanes, regs", [(AVX512, 16, 32), (AVX2, 8, 16)])
def test_register_tile_is_read_from_the_sketch_and_the_target(target, lanes, regs):
    space = DesignSpace(ops.gemm(256, 256, 64), target)
    for sk in space.sketches:
        (tile,) = register_tiles(sk.trace, space.func, target)
        assert (tile.lanes, tile.high, tile.low) == (lanes, regs, regs // 4)
        # i3 and j3, the vectorized j innermost
        assert [(p.var, p.kind, p.pos) for p in tile.parts] == [(0, "S", 3), (1, "S", 3)]
        assert tile.vector_extent == 256
        j = tile.parts[-1].inst
        d = {tile.parts[0].inst: [1, 64, 1, 4], j: [4, 1, 1, 4 * lanes]}
        assert tile.accumulators(d) == 16 and tile.fits(d) == (16 + 4 + 1 <= regs)
        d[j] = [8, 1, 2, lanes // 2]                # half a vector: not a multiple of lanes
        assert not tile.fits(d)
        d = {tile.parts[0].inst: [256, 1, 1, 1], j: [16, 1, 1, 16]}   # too few accumulators
        assert tile.accumulators(d) == -(-16 // lanes) and not tile.fits(d)


def test_channel_sketch_vectorizes_the_output_channel():
    wl = ops.conv2d(N=1, C=4, H=7, W=7, K=32, R=3, S=3, padding=1)
    space = DesignSpace(wl, AVX512)
    vec = set()
    for sk in space.sketches:
        for tile in register_tiles(sk.trace, space.func, AVX512):
            vec.add(tile.vector_extent)
    assert vec == {7, 32}      # the output columns (7) or, channel-last, the channel (32)


@pytest.mark.parametrize("target", [AVX512, AVX2])
@pytest.mark.parametrize("make", [lambda: ops.gemm(64, 128, 16), user_contraction,
                                  lambda: ops.conv2d(N=1, C=4, H=7, W=7, K=32, R=3, S=3,
                                                     padding=1)], ids=["gemm", "user", "conv"])
def test_most_draws_fit_the_registers(make, target):
    wl = make()
    space = DesignSpace(wl, target)
    draws = space.sample(24, seed=3)
    fit = sum(_fits(space, s) for s in draws)
    # uniform draws of the same tilings: how often they fit by chance
    rng = random.Random(0)
    chance = 0
    for _ in range(400):
        sk = space.sketches[rng.randrange(len(space.sketches))]
        for tile in register_tiles(sk.trace, space.func, target):
            d = {i: list(perfect_tilings(ext, *sk.trace.insts[i].inputs[1:3])[
                rng.randrange(len(perfect_tilings(ext, *sk.trace.insts[i].inputs[1:3])))])
                for i, ext in tile.tiles.items()}
            chance += tile.fits(d)
    assert fit / len(draws) >= 0.6 > 1.5 * chance / 400
    for n, s in enumerate(draws[:2]):      # fitting or not, each draw computes the same
        check_on_interp(s, wl, seed=n)


def test_register_tile_draws_are_seeded_and_optional():
    space = DesignSpace(ops.gemm(128, 128, 32), AVX2)
    sk = space.sketches[0]
    a = sample_register_tiles(sk, space.func, AVX2, seed=5)
    assert a == sample_register_tiles(sk, space.func, AVX2, seed=5)
    assert sample_register_tiles(sk, space.func, AVX2, seed=5, share=0.0) == {}
    (tile,) = register_tiles(sk.trace, space.func, AVX2)
    got = sample_register_tiles(sk, space.func, AVX2, seed=7, share=1.0)
    assert set(got) == set(tile.tiles) and tile.fits(got)
    assert register_tiles(sk.trace, space.func, Target("cuda")) == []


def test_analytic_prior_prefers_the_register_tiled_program():
    wl = ops.gemm(64, 128, 32)
    tuned, naive = expert_schedule(wl, AVX512), Schedule(wl)
    for s in (tuned, naive):
        check_on_interp(s, wl)
    scores = analytic_prior([extract(lower(s), AVX512) for s in (tuned, naive)])
    assert scores[0] > scores[1] + 1.0      # more than e times fewer estimated cycles


def test_untrained_model_predicts_the_prior_random_model_stays_random():
    wl = ops.gemm(64, 64, 32)
    space = DesignSpace(wl, AVX512)
    scheds = space.sample(6, seed=0)
    ctx = TuneContext(wl, AVX512, space, XGBCostModel(seed=0), None, seed=0)
    assert ctx.uses_prior
    want = analytic_prior([extract(lower(s), AVX512) for s in scheds])
    assert np.allclose(ctx.predict(scheds), want)
    rnd = TuneContext(wl, AVX512, space, RandomModel(seed=0), None, seed=0)
    off = TuneContext(wl, AVX512, space, XGBCostModel(seed=0), None, seed=0, prior=False)
    for c in (rnd, off):
        assert not c.uses_prior
        assert not np.allclose(c.predict(scheds), want)


def test_first_round_covers_every_sketch():
    wl = ops.gemm(64, 128, 32)
    space = DesignSpace(wl, AVX512)
    ctx = TuneContext(wl, AVX512, space, XGBCostModel(seed=0), None, seed=0)
    search = EvolutionarySearch(population=48, generations=1)
    search.pre_tuning(ctx)
    n = len(space.sketches)
    got = search.generate_candidates(n)
    groups = [space.sketch_of(s.trace) for s in got]
    assert len(set(groups)) == n        # one per sketch (None: a trace matching none)
    for s in got[:2]:
        check_on_interp(s, wl)


def test_padded_loop_is_tiled_over_its_padded_extent():
    wl = ops.gemm(32, 211, 16)         # 211 is prime: MultiLevelTiling pads it to 224
    space = DesignSpace(wl, AVX512)
    tiles = [t for sk in space.sketches for t in register_tiles(sk.trace, space.func, AVX512)]
    # the columns padded to 224, or (the channel sketch: 211 fills no vectors) the rows
    assert tiles and {t.vector_extent for t in tiles} == {224, 32}
    sch = space.sample(1, seed=2)[0]
    check_on_interp(sch, wl)


def _panels(space, sch) -> list:
    sk = space.sketches[space.sketch_of(sch.trace)].trace
    return [p for t in register_tiles(sk, space.func, space.target) for p in t.panels]


def test_packed_panel_is_read_from_the_sketch_and_the_target():
    """The packed copy of B (the read cache at the column tile's loop) spans the whole
    reduction and the columns inside that loop; it fits within half the target's L2."""
    wl = ops.gemm(1024, 1024, 1024)
    space = DesignSpace(wl, AVX512)
    sketches = space.sketches
    packed = [sk for sk in sketches if any(i.kind == "cache_read" for i in sk.trace.insts)]
    assert packed and len(packed) < len(sketches)
    for sk in sketches:
        (tile,) = register_tiles(sk.trace, space.func, AVX512)
        assert len(tile.panels) == any(sk is p for p in packed)
    (tile,) = register_tiles(packed[0].trace, space.func, AVX512)
    (panel,) = tile.panels
    i, j, k = sorted(tile.tiles)
    d = {i: [1, 256, 1, 4], j: [16, 1, 1, 64], k: [16, 64]}    # the expert's tiles
    assert panel.buffer == "B" and panel.footprint(d) == 1024 * 64 * 4
    assert panel.budget == AVX512.l2_bytes // 2 and tile.fits(d)
    d[j] = [1, 4, 4, 64]          # the copy at a loop of one iteration: all of B
    assert panel.footprint(d) == 1024 * 1024 * 4 and not tile.fits(d)
    d[k] = [1024, 1]              # the reduction is inside the copy's loop either way
    assert panel.footprint(d) == 1024 * 1024 * 4
    small = Target("llvm -mcpu=skylake-avx512 -num-cores=2", vector_bits=512,
                   l2_bytes=256 * 1024)
    (tile,) = register_tiles(packed[0].trace, space.func, small)
    assert not tile.fits({i: [1, 256, 1, 4], j: [16, 1, 1, 64], k: [16, 64]})


def test_packed_draws_fit_their_panel_in_the_l2():
    wl = ops.gemm(64, 256, 128)
    target = Target("llvm -mcpu=skylake-avx512 -num-cores=2", vector_bits=512,
                    l2_bytes=64 * 1024)      # a panel of at most 32 KiB: 64 columns
    space = DesignSpace(wl, target)
    draws = [s for s in space.sample(40, seed=1) if _panels(space, s)]
    fit = [all(p.fits(s.trace.decisions) for p in _panels(space, s)) for s in draws]
    assert len(draws) >= 10 and sum(fit) >= 0.6 * len(draws)
    rng = random.Random(0)      # uniform tilings of the same sketches: how often by chance
    sk = next(sk for sk in space.sketches if any(i.kind == "cache_read" for i in sk.trace.insts))
    (tile,) = register_tiles(sk.trace, space.func, target)
    chance = 0
    for _ in range(300):
        d = {}
        for i, ext in tile.tiles.items():
            opts = perfect_tilings(ext, *sk.trace.insts[i].inputs[1:3])
            d[i] = list(opts[rng.randrange(len(opts))])
        chance += tile.panels[0].fits(d)
    assert sum(fit) / len(draws) > chance / 300
    check_on_interp(draws[fit.index(True)], wl)


def test_channel_sketch_packs_its_weight_panel():
    """The channel sketch reorders its register tile alone (k innermost); the rest of the
    nest stays, and with it the loop its packed weight is computed at: a panel of the
    output channels inside the first tile level, all input channels and the window."""
    wl = ops.conv2d(N=1, C=8, H=7, W=7, K=64, R=3, S=3, padding=1)
    space = DesignSpace(wl, AVX512)
    channel = [sk for sk in space.sketches
               if any(i.kind == "transform_layout" for i in sk.trace.insts)]
    assert len(channel) == 1
    (tile,) = register_tiles(channel[0].trace, space.func, AVX512)
    assert [p.var for p in tile.parts][-1] == 1       # k vectorized, innermost
    (panel,) = tile.panels
    assert panel.buffer == "W"
    mine = space.sketch_of(channel[0].trace)
    sch = next(s for s in space.sample(24, seed=0) if space.sketch_of(s.trace) == mine)
    d = sch.trace.decisions
    k = next(p.inst for p in tile.parts if p.var == 1)
    assert panel.footprint(d) == 4 * (64 // d[k][0]) * 8 * 3 * 3
    check_on_interp(sch, wl)


def test_register_tile_asks_a_task_per_core_of_the_first_tile_level():
    """On a multi-core target a fitting tiling gives the first tile level (the loops every
    sketch's parallel loop fuses) at least one iteration per core, fewer only where the
    extents outside the register tile are fewer; one core asks nothing."""
    wl = ops.gemm(64, 256, 16)
    four = Target("llvm -mcpu=skylake-avx512 -num-cores=4", vector_bits=512)
    one = Target("llvm -mcpu=skylake-avx512 -num-cores=1", vector_bits=512)
    space = DesignSpace(wl, four)
    sk = space.sketches[0]
    (tile,) = register_tiles(sk.trace, space.func, four)
    (alone,) = register_tiles(sk.trace, space.func, one)
    i, j, k = sorted(tile.tiles)
    assert tile.tasks == 4 and alone.tasks == 1
    assert [p.inst for p in tile.outer] == [i, j]
    d = {i: [1, 16, 1, 4], j: [1, 4, 1, 64], k: [2, 8]}       # 16 accumulators, one task
    assert tile.accumulators(d) == 16 and not tile.fits(d) and alone.fits(d)
    d[i], d[j] = [2, 8, 1, 4], [2, 2, 1, 64]                    # 2 x 2 tasks
    assert tile.fits(d)
    d[i], d[j] = [4, 4, 1, 4], [1, 4, 1, 64]
    assert tile.fits(d)
    small = DesignSpace(ops.gemm(4, 32, 16), four)         # a 4 x 32 tile: one task is all
    (tile,) = register_tiles(small.sketches[0].trace, small.func, four)
    i, j, k = sorted(tile.tiles)
    assert tile.fits({i: [1, 1, 1, 4], j: [1, 1, 1, 32], k: [2, 8]})
    draws = space.sample(24, seed=4)
    tasks = []
    for s in draws:
        (t,) = register_tiles(space.sketches[space.sketch_of(s.trace)].trace, space.func, four)
        n = 1
        for p in t.outer:
            n *= p.factor(s.trace.decisions)
        tasks.append(n)
    assert sum(n >= 4 for n in tasks) >= 0.6 * len(draws)
    check_on_interp(draws[0], wl)


@pytest.mark.parametrize("target", [AVX512, AVX2])
def test_register_tile_holds_at_most_the_accumulator_budget(target):
    """A register tile fits with at most three quarters of the registers as accumulators
    (24 of 32, 12 of 16) and the operands' registers left over: 28 of AVX-512's 32
    registers as accumulators fit the registers but ran at 0.75 of the 8-16 accumulator
    tiles (ResNet-18 C6, one core); no draw of the conv's channel sketch holds more."""
    from explorer.space.register_tiles import max_accumulators
    wl = ops.conv2d(N=1, C=8, H=14, W=14, K=32, R=3, S=3, padding=1)
    space = DesignSpace(wl, target)
    lanes, regs = target.vector_lanes, target.vector_registers
    budget = min(max_accumulators(regs), regs - 32 // lanes - 1)  # channel vectors, broadcast
    assert budget == (24 if regs == 32 else 12 - (32 // lanes - 3)) and budget < 28
    sk = next(s for s in space.sketches
              if register_tiles(s.trace, space.func, target)[0].vector_extent == 32)
    (tile,) = register_tiles(sk.trace, space.func, target)
    n, k, p, q = (tile.outer[v].inst for v in range(4))
    base = {n: [1, 1, 1, 1], k: [1, 1, 1, 32], p: [2, 7, 1, 1]}
    for cols in (1, 2, 7, 14):
        d = {**base, q: [1, 14 // cols, 1, cols]}
        acc = tile.accumulators(d)
        assert acc == cols * 32 // lanes
        assert tile.fits(d) == (regs // 4 <= acc <= budget), (cols, acc)
    draws = space.sample(24, seed=1)
    got = [t.accumulators(s.trace.decisions) for s in draws
           for t in register_tiles(space.sketches[space.sketch_of(s.trace)].trace,
                                   space.func, target)]
    assert sum(a <= budget for a in got) >= 0.6 * len(got)
    check_on_interp(draws[0], wl)


@pytest.mark.parametrize("target", [AVX512, AVX2])
def test_the_expert_gemm_tile_is_one_the_search_counts_as_fitting(target):
    """BERT's 128x768x768 gemm: the expert's register tile (8 x 48 on AVX-512, 24
    accumulators; 4 x 24 on AVX2, 12) is inside the budget the search conditions its
    draws on, so the search alone can reach it (a cap of 16 kept it out: search alone
    reached 0.88 of the seeded run there)."""
    from explorer.space.expert import expert_trace
    wl = ops.gemm(128, 768, 768)
    space = DesignSpace(wl, target)
    trace = expert_trace(wl, target)
    (tile,) = register_tiles(trace, space.func, target)
    acc = tile.accumulators(trace.decisions)
    assert acc == target.vector_registers * 3 // 4 and tile.fits(trace.decisions)
    # (the tile's kernels are checked against numpy in test_expert.py)
