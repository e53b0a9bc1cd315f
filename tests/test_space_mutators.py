"""Mutators: each changes what it should, keeps what it must, and most mutations
stay valid (measured here: the issue asks >= 95% for gemm and conv2d; on the GPU the
tile-size mutator proposes only tilings within the target's limits)."""
import math
import os
import random

import pytest

from explorer import Target, ops
from explorer.space import DesignSpace
from explorer.space import analysis as A
from explorer.space.expert import sketch_with_write_cache
from explorer.space.mutators import (MutateComputeLocation, MutateParallel,
                                     MutateThreadBinding, MutateTileSize, MutateUnroll)
from explorer.space.mutators.gpu_limits import GPUTilingLimits
from explorer.space.mutators.unroll import categorical_uses
from explorer.space.postprocs.verify_gpu import footprints
from explorer.space.register_tiles import register_tiles
from explorer.space.replay import with_input
from explorer.space.validate import check_on_interp

CPU = Target("llvm -num-cores=2")
GPU = Target("cuda")
# every field given: the same lanes and registers on any host
AVX512 = Target("llvm -mcpu=skylake-avx512 -num-cores=2", vector_bits=512)
AVX2 = Target("llvm -mcpu=haswell -num-cores=2", vector_bits=256)


def changed(a, b) -> list:
    return [k for k in set(a.decisions) | set(b.decisions)
            if a.decisions.get(k) != b.decisions.get(k)]


def test_tile_size_keeps_the_product_and_the_innermost_bound():
    wl = ops.gemm(64, 48, 32)
    sp = DesignSpace(wl, CPU)
    rng = random.Random(0)
    for parent in sp.sample(10, seed=1):
        trace = sp.design_trace(parent.trace)
        child = MutateTileSize().apply(trace, rng, wl)
        (k,) = changed(trace, child)
        old, new = trace.decisions[k], child.decisions[k]
        assert old != new and sorted(old) != [1] * len(old)
        prod = lambda xs: eval("*".join(map(str, xs)))  # noqa: E731
        assert prod(old) == prod(new) and new[-1] <= trace.insts[k].inputs[2]
        assert child.insts == trace.insts


def test_unroll_changes_only_the_unroll_choice():
    sp = DesignSpace(ops.gemm(16, 16, 16), CPU)
    trace = sp.sample(1, seed=2)[0].trace
    design = sp.design_trace(trace)
    child = MutateUnroll().apply(design, random.Random(1), sp.workload)
    (k,) = changed(design, child)
    assert design.insts[k].kind == "sample_categorical"
    assert design.insts[k].inputs[0] == [0, 16, 64, 512]


def test_compute_location_moves_the_block_elsewhere_legally():
    wl = ops.conv2d(1, 2, 4, 4, 2, 3, 3, padding=1)
    sp = DesignSpace(wl, CPU)
    rng = random.Random(3)
    for parent in sp.sample(3, seed=3):
        design = sp.design_trace(parent.trace)
        child = MutateComputeLocation().apply(design, rng, wl)
        (k,) = changed(design, child)
        assert design.insts[k].kind == "sample_compute_location"
        sch = sp.apply(child)
        assert sch is not None, sp.last_error
        check_on_interp(sch, wl)


def test_parallel_changes_how_many_loops_run_in_parallel():
    wl = ops.gemm(64, 64, 64)
    sp = DesignSpace(wl, CPU)
    trace = sketch_with_write_cache(sp, 0)   # one nest
    idx = trace.sampling_indices()
    trace = trace.with_decision(idx[0], [4, 4, 1, 4]).with_decision(idx[1], [4, 1, 4, 4])
    child = MutateParallel().apply(trace, random.Random(0), wl)
    values = {i.inputs[2] for i in child.insts if i.kind == "annotate"
              and i.inputs[1] == A.PARALLEL}
    assert len(values) == 1 and values != {32}
    par = lambda t: [ln for ln in sp.apply(t).script().splitlines() if "parallel(" in ln]  # noqa
    assert par(child) != par(trace)
    # the child still follows its sketch: replayed to the sketch's end, its own limit kept
    k = sp.sketch_of(trace)
    assert k is not None and sp.sketch_of(child) == k
    design = sp.design_trace(sp.apply(child).trace)
    assert len(design.insts) == len(sp.sketches[k].trace.insts)
    assert {i.inputs[2] for i in design.insts if i.kind == "annotate"
            and i.inputs[1] == A.PARALLEL} == values
    check_on_interp(sp.apply(child), wl)


def test_thread_binding_changes_a_thread_count():
    wl = ops.elementwise(64, 64)
    sp = DesignSpace(wl, GPU)
    trace = sp.sample(1, seed=0)[0].trace
    design = sp.design_trace(trace)
    child = MutateThreadBinding().apply(design, random.Random(0), wl)
    (k,) = changed(design, child)
    assert design.insts[k].inputs[0] == [32, 64, 128, 256, 512, 1024]
    check_on_interp(sp.apply(child), wl)


def test_mutate_is_none_without_choices_and_deterministic_with_a_seed():
    sp = DesignSpace(ops.elementwise(6, 10), CPU)
    assert sp.mutate(sp.sample(1)[0].trace, random.Random(0)) is None
    sp = DesignSpace(ops.gemm(16, 16, 16), CPU)
    trace = sp.sample(1, seed=4)[0].trace
    a = [sp.mutate(trace, random.Random(7)).decisions for _ in range(3)]
    assert a[0] == a[1] == a[2]
    import numpy as np
    assert sp.mutate(trace, np.random.default_rng(1)) is not None


def valid_share(wl, target, parents=20, per_parent=10, seed=0):
    sp = DesignSpace(wl, target)
    rng = random.Random(seed)
    drawn = sp.sample(parents, seed=seed + 1)
    total = valid = 0
    for p in drawn:
        for _ in range(per_parent):
            child = sp.mutate(p.trace, rng)
            if child is None:
                continue
            total += 1
            sch = sp.apply(child)
            if sch is not None:
                valid += 1
    return valid / total, total


@pytest.mark.parametrize("name,wl", [
    ("gemm", ops.gemm(8, 12, 10)), ("gemm", ops.gemm(128, 128, 128)),
    ("conv2d", ops.conv2d(1, 3, 7, 6, 4, 3, 3)),
    ("conv2d", ops.conv2d(1, 2, 4, 4, 2, 3, 3, padding=1))])
def test_mutations_stay_valid_on_cpu(name, wl, record_property):
    parents = 40 if os.environ.get("EXPLORER_SLOW") else 6
    share, total = valid_share(wl, CPU, parents=parents)
    record_property("valid_share", share)
    print(f"\n{wl.key}: {share:.1%} of {total} CPU mutations valid")
    assert total >= parents * 9 and share >= 0.95


@pytest.mark.parametrize("name,wl", [("gemm", ops.gemm(32, 32, 16)),
                                     ("conv2d", ops.conv2d(1, 2, 10, 10, 16, 3, 3))])
def test_mutations_on_gpu_stay_valid(name, wl, record_property):
    """The issue's >= 95%, per mutation and without retries: the tile-size mutator proposes
    only tilings within the GPU's limits. Measured before it did: 88% (gemm), 83% (conv2d)
    of 250; now 100%. Retrying (``mutate_valid``) is kept for what the checks do not see."""
    parents = 20 if os.environ.get("EXPLORER_SLOW") else 8
    sp = DesignSpace(wl, GPU)
    rng = random.Random(5)
    drawn = sp.sample(parents, seed=6)
    total = valid = 0
    for p in drawn:
        for _ in range(25):
            child = sp.mutate(p.trace, rng)
            total += 1
            valid += sp.apply(child) is not None
    record_property("valid_share", valid / total)
    print(f"\n{wl.key}: {valid / total:.1%} of {total} GPU mutations valid without retries")
    assert total >= 200 and valid / total >= 0.95
    for p in drawn[:3]:
        child, sch = sp.mutate_valid(p.trace, rng)
        assert sp.apply(child).script() == sch.script()
        check_on_interp(sch, wl)


# ------------------------------------------------------------ GPU limits, one by one
# A gemm tiled "SSSRRSRS": its two spatial tilings have 5 levels, the second bound to
# vthread.x, the third to threadIdx.x; the reduction tiling has 3, the shared-memory
# caches sit under its first level.

def gpu_gemm(target, i_tiles, j_tiles, k_tiles=None):
    """A space for gemm 64^3 on ``target`` and a design trace with these tilings."""
    sp = DesignSpace(ops.gemm(64, 64, 64), target)
    trace = sp.design_trace(sp.sample(1, seed=0)[0].trace)
    tiles = [i for i in trace.sampling_indices() if trace.insts[i].kind == "sample_perfect_tile"]
    for i, d in zip(tiles, [i_tiles, j_tiles, k_tiles]):
        if d is not None:
            trace = trace.with_decision(i, d)
    return sp, trace


def spatial(trace) -> list:
    return [trace.decisions[i] for i in trace.sampling_indices()
            if trace.insts[i].kind == "sample_perfect_tile" and trace.insts[i].inputs[1] == 5]


def threads(trace) -> int:
    return math.prod(d[2] for d in spatial(trace))


def vthreads(trace) -> int:
    return math.prod(d[1] for d in spatial(trace))


def children(mutator, trace, wl, n=60) -> list:
    out = [mutator.apply(trace, random.Random(s), wl) for s in range(n)]
    return [c for c in out if c is not None]


def test_tile_size_never_proposes_more_threads_than_the_target_allows():
    sp, trace = gpu_gemm(Target("cuda", max_threads_per_block=64), [1, 1, 8, 8, 1],
                         [1, 1, 8, 8, 1])
    assert sp.apply(trace) is not None and threads(trace) == 64
    # without the check, moves into threadIdx are proposed...
    assert any(threads(c) > 64 for c in children(MutateTileSize(), trace, sp.workload))
    # ... with it, never; every child is valid
    kids = children(sp.mutators[0][0], trace, sp.workload)
    assert len(kids) == 60 and all(threads(c) <= 64 for c in kids)
    assert all(sp.apply(c) is not None for c in kids[:20])
    check_on_interp(sp.apply(kids[0]), sp.workload)


def test_tile_size_keeps_the_minimum_of_one_warp():
    sp, trace = gpu_gemm(GPU, [2, 2, 4, 4, 1], [2, 1, 8, 4, 1])
    assert sp.apply(trace) is not None and threads(trace) == 32   # tiling asks 32..1024
    assert any(threads(c) < 32 for c in children(MutateTileSize(), trace, sp.workload))
    kids = children(sp.mutators[0][0], trace, sp.workload)
    assert kids and all(threads(c) >= 32 for c in kids)
    assert all(sp.apply(c) is not None for c in kids[:20])


def test_tile_size_keeps_at_most_eight_virtual_threads():
    sp, trace = gpu_gemm(GPU, [1, 4, 4, 4, 1], [1, 2, 8, 4, 1])
    assert sp.apply(trace) is not None and vthreads(trace) == 8
    free = children(MutateTileSize(), trace, sp.workload)
    assert any(vthreads(c) > 8 for c in free)
    assert any("virtual threads" in (sp.apply(c) is None and sp.last_error or "")
               for c in free if vthreads(c) > 8)
    kids = children(sp.mutators[0][0], trace, sp.workload)
    assert kids and all(vthreads(c) <= 8 for c in kids)
    assert all(sp.apply(c) is not None for c in kids[:20])


def test_tile_size_keeps_the_shared_memory_within_the_limit():
    tiles = ([1, 1, 8, 8, 1], [1, 1, 8, 8, 1], [8, 8, 1])
    sp, trace = gpu_gemm(GPU, *tiles)
    used = sum(n for (_, scope), n in footprints(sp.apply(trace).func).items()
               if scope == "shared")
    sp, trace = gpu_gemm(Target("cuda", max_shared_memory_per_block=used), *tiles)
    assert sp.apply(trace) is not None
    rejected = [sp.last_error for c in children(MutateTileSize(), trace, sp.workload)
                if sp.apply(c) is None]
    assert any("shared memory" in r for r in rejected)
    kids = children(sp.mutators[0][0], trace, sp.workload, n=40)
    assert kids and all(sp.apply(c) is not None for c in kids)
    check_on_interp(sp.apply(kids[-1]), sp.workload)


def test_tile_size_is_none_when_no_move_is_legal():
    sp, trace = gpu_gemm(GPU, [1, 1, 8, 8, 1], [1, 1, 8, 8, 1])
    m = MutateTileSize()
    m.initialize(Target("cuda", max_shared_memory_per_block=4))   # no tile fits in 4 bytes
    assert all(m.apply(trace, random.Random(s), sp.workload) is None for s in range(10))
    assert MutateTileSize().apply(trace, random.Random(0), sp.workload) is not None


def test_fetch_vector_length_fits_a_gpu_vector():
    sp, trace = gpu_gemm(GPU, [1, 1, 8, 8, 1], [1, 1, 8, 8, 1])
    fetch = categorical_uses(trace, lambda ins, x: ins.kind == "annotate"
                             and ins.inputs[1] == A.COOPERATIVE_FETCH)
    for i in fetch:   # as a trace made with wider vector lengths would hold them
        trace = with_input(trace, i, 0, [1, 2, 4, 8])
        trace = with_input(trace, i, 1, [0.25] * 4).with_decision(i, 0)
    lengths = lambda kids: {c.decisions[i] for c in kids for i in fetch}  # noqa: E731
    assert 3 in lengths(children(MutateTileSize(), trace, sp.workload))    # 8 floats: 32 bytes
    kids = children(sp.mutators[0][0], trace, sp.workload)
    assert lengths(kids) - {0} and 3 not in lengths(kids)


def test_thread_binding_picks_only_thread_counts_the_target_allows():
    wl = ops.elementwise(64, 64)
    sp = DesignSpace(wl, GPU)
    design = sp.design_trace(sp.sample(1, seed=0)[0].trace)
    (k,) = [i for i in design.sampling_indices() if design.insts[i].kind == "sample_categorical"]
    picked = lambda m: {design.insts[k].inputs[0][c.decisions[k]]  # noqa: E731
                        for c in children(m, design, wl, n=30)}
    assert max(picked(MutateThreadBinding())) > 128
    m = MutateThreadBinding()
    m.initialize(Target("cuda", max_threads_per_block=128))
    assert picked(m) and max(picked(m)) <= 128


@pytest.mark.parametrize("wl", [ops.gemm(32, 32, 16), ops.conv2d(1, 2, 10, 10, 16, 3, 3)])
def test_gpu_limits_agree_with_verify_gpu_code(wl):
    """The mutator's arithmetic (threads, virtual threads, shared bytes from the decisions)
    says what VerifyGPUCode says, on children proposed without it, valid or not."""
    sp = DesignSpace(wl, GPU)
    free, rng = MutateTileSize(), random.Random(2)
    verdicts = set()
    for p in sp.sample(3, seed=3):
        design = sp.design_trace(p.trace)
        for _ in range(20):     # parents sampled within the limits: some children break them
            child = free.apply(design, rng, wl)
            limits = GPUTilingLimits(child, sp.func, GPU)
            sch = sp.apply(child)
            assert (limits.violation(child.decisions) is None) == (sch is not None), \
                sp.last_error
            verdicts.add(sch is not None)
            if sch is not None:
                (n,) = limits.memory_bytes(child.decisions).values()
                assert n == sum(v for (_, s), v in footprints(sch.func).items() if s == "shared")
    assert verdicts == {True, False}


def test_cpu_mutations_are_unchanged_by_the_target():
    """Without the register tiles, a CPU target changes no move (the GPU limits are
    GPU-only); with them (the default) the moves differ."""
    sp = DesignSpace(ops.gemm(64, 48, 32), CPU)
    design = sp.design_trace(sp.sample(1, seed=1)[0].trace)
    plain = MutateTileSize(keep_register_tile=False)
    plain.initialize(CPU)
    want = [c.decisions for c in children(MutateTileSize(), design, sp.workload, 20)]
    assert [c.decisions for c in children(plain, design, sp.workload, 20)] == want
    assert [c.decisions for c in children(sp.mutators[0][0], design, sp.workload, 20)] != want


# ------------------------------------------------------------ CPU register tiles

def cpu_mutator(target, keep=True) -> MutateTileSize:
    m = MutateTileSize(keep_register_tile=keep)
    m.initialize(target)
    return m


def fitting(sp, trace) -> bool:
    regs = register_tiles(sp.design_trace(trace), sp.func, sp.target)
    return bool(regs) and all(r.fits(trace.decisions) for r in regs)


def fit_shares(sp, parents, keep, per_parent=12) -> tuple:
    """(share of the children of fitting parents that fit, of unfitting parents)."""
    m, rng = cpu_mutator(sp.target, keep), random.Random(3)
    counts = {True: [0, 0], False: [0, 0]}
    for p in parents:
        trace = sp.design_trace(p.trace)
        for _ in range(per_parent):
            child = m.apply(trace, rng, sp.workload)
            if child is not None:
                c = counts[fitting(sp, trace)]
                c[0] += 1
                c[1] += fitting(sp, child)
    return tuple(c[1] / c[0] if c[0] else None for c in (counts[True], counts[False]))


@pytest.mark.parametrize("target", [AVX512, AVX2], ids=["avx512", "avx2"])
@pytest.mark.parametrize("wl", [ops.gemm(64, 128, 32),
                                ops.conv2d(N=1, C=8, H=14, W=14, K=32, R=3, S=3, padding=1)],
                         ids=["gemm", "conv2d"])
def test_tile_size_keeps_a_fitting_register_tile(wl, target):
    """A child of a parent whose register tile fits the registers fits too; uniform moves
    (the mutator as it was) put some children out of them. A parent that does not fit
    gets a move that makes it fit more often than uniform moves give one."""
    sp = DesignSpace(wl, target)
    parents = sp.sample(16, seed=0)
    kept, toward = fit_shares(sp, parents, keep=True)
    drift, by_chance = fit_shares(sp, parents, keep=False)
    assert kept == 1.0 and drift < 0.97
    if toward is not None:
        assert toward > by_chance
    m, rng = cpu_mutator(target), random.Random(0)
    for n, p in enumerate(parents[:2]):     # each child computes what numpy does
        child = sp.apply(m.apply(sp.design_trace(p.trace), rng, wl))
        assert child is not None, sp.last_error
        check_on_interp(child, wl, seed=n)


def test_register_tile_is_reshaped_within_the_budget():
    """From the expert's shape (4 rows x 4 vectors: 16 accumulators of AVX-512's 32) the
    trades reach other shapes of the tile (8 x 2 vectors...) in one mutation, every one
    within the budget, and the loop extents kept."""
    wl = ops.gemm(64, 256, 32)
    sp = DesignSpace(wl, AVX512)
    trace = sketch_with_write_cache(sp, 2, packed=True)
    tiles = [i for i in trace.sampling_indices() if trace.insts[i].kind == "sample_perfect_tile"]
    i, j, k = tiles
    trace = (trace.with_decision(i, [1, 16, 1, 4]).with_decision(j, [4, 1, 1, 64])
             .with_decision(k, [2, 16]))
    (reg,) = register_tiles(trace, sp.func, AVX512)
    assert reg.fits(trace.decisions) and reg.accumulators(trace.decisions) == 16
    m, shapes = cpu_mutator(AVX512), set()
    for s in range(200):
        child = m.apply(trace, random.Random(s), wl)
        assert math.prod(child.decisions[i]) == 64 and math.prod(child.decisions[j]) == 256
        assert reg.fits(child.decisions)
        shapes.add((child.decisions[i][-1], child.decisions[j][-1]))
    # both factors changed in one step: only a trade does that
    assert {(8, 32), (2, 128)} & shapes
    assert len(shapes) >= 4
    traded = [c for c in (m.apply(trace, random.Random(s), wl) for s in range(40))
              if c.decisions[i][-1] != 4 and c.decisions[j][-1] != 64]
    assert traded       # a reshaped tile computes what numpy does
    check_on_interp(sp.apply(traded[0]), wl)
