"""Mutators: each changes what it should, keeps what it must, and most mutations
stay valid (measured here: the issue asks >= 95% for gemm and conv2d)."""
import os
import random

import pytest

from explorer import Target, ops
from explorer.expert import sketch_with_write_cache
from explorer.space import DesignSpace
from explorer.space import analysis as A
from explorer.space.mutators import (MutateComputeLocation, MutateParallel,
                                     MutateThreadBinding, MutateTileSize, MutateUnroll)
from explorer.space.validate import check_on_interp

CPU = Target("llvm -num-cores=2")
GPU = Target("cuda")


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


@pytest.mark.parametrize("wl", [ops.gemm(32, 32, 16), ops.conv2d(1, 2, 10, 10, 16, 3, 3)])
def test_mutations_on_gpu_are_mostly_valid_and_retried(wl, record_property):
    sp = DesignSpace(wl, GPU)
    rng = random.Random(5)
    total = valid = 0
    for p in sp.sample(20 if os.environ.get("EXPLORER_SLOW") else 4, seed=6):
        for _ in range(8):
            child = sp.mutate(p.trace, rng)
            total += 1
            valid += sp.apply(child) is not None
        child, sch = sp.mutate_valid(p.trace, rng)
        assert sp.apply(child).script() == sch.script()
        check_on_interp(sch, wl)
    record_property("valid_share", valid / total)
    print(f"\n{wl.key}: {valid / total:.1%} of {total} GPU mutations valid without retries")
    assert valid / total >= 0.5
