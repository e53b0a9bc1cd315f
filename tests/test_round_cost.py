"""The shortcuts that make a search round cheap give the answers of the slow paths they
replace: the per-function index, sketch matching without JSON, compute_at / inline
checks without building the nest, the injectivity proof of decompose_reduction, the
analyses cached on immutable nodes, and ``round_cost``'s table itself."""
import pickle
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from explorer import Target, ops
from explorer.errors import ScheduleError
from explorer.ir.arith import simplify, sym_bounds
from explorer.ir.expr import FloorDiv, Var, const
from explorer.ir.functor import expr_vars, iter_nodes, walk_stmt
from explorer.ir.index import FuncIndex, index_of
from explorer.ir.stmt import BlockRealize, For
from explorer.schedule import block_prims, reduction_prims
from explorer.schedule.tree import loops_of, readers, writers
from explorer.space import DesignSpace
from explorer.space.replay import follows, structure

ROOT = Path(__file__).resolve().parent.parent
TARGET = Target("llvm -mcpu=skylake-avx512 -num-cores=2", vector_bits=512)


def _spaces():
    return [DesignSpace(ops.get("gemm", 64, 96, 32), TARGET),
            DesignSpace(ops.conv2d(N=1, C=8, H=10, W=10, K=16, R=3, S=3, padding=1), TARGET),
            DesignSpace(ops.dense_bias_relu(16, 32, 48), TARGET)]


@pytest.fixture(scope="module")
def samples():
    return [(sp, sp.sample(3, seed=2)) for sp in _spaces()]


def test_index_answers_what_a_walk_of_the_tree_answers(samples):
    for _, schs in samples:
        for sch in schs:
            idx = FuncIndex(sch.func)
            walked = [(n, p) for n, p in walk_stmt(sch.func.body)
                      if isinstance(n, (For, BlockRealize))]
            for node, path in walked:
                table = idx.loops if isinstance(node, For) else idx.blocks
                name = node.var.name if isinstance(node, For) else node.block.name
                got_node, got_path = table[name]
                assert got_node is node and len(got_path) == len(path)
                assert all(a is b for a, b in zip(got_path, path))
            order = [n.block.name for n, _ in walked if isinstance(n, BlockRealize)]
            assert idx.order == order
            for r, _ in walked:
                if isinstance(r, BlockRealize):
                    buf = r.block.body.buffer.name
                    assert writers(sch.func, buf) == [
                        n.block.name for n in iter_nodes(sch.func.body)
                        if isinstance(n, BlockRealize) and n.block.body.buffer.name == buf]
                    for b in r.block.reads():
                        assert readers(sch.func, b.name) == [
                            n.block.name for n in iter_nodes(sch.func.body)
                            if isinstance(n, BlockRealize)
                            and any(x.name == b.name for x in n.block.reads())]


def test_an_edit_makes_a_new_index_and_shares_untouched_subtrees(samples):
    _, schs = samples[0]
    sch = schs[0].copy()
    before = sch.func
    old_idx = index_of(before)
    blk = sch.get_block("C")
    loop = sch.get_loops(blk)[-1]
    name = sch.get(loop)
    sch.annotate(loop, "note", 1)
    assert sch.func is not before and index_of(sch.func) is not old_idx
    assert dict(index_of(sch.func).loops[name][0].annotations)["note"] == 1
    assert "note" not in dict(old_idx.loops[name][0].annotations)
    # siblings off the edited path are the same objects in both functions
    shared = {id(n) for n in iter_nodes(before.body)} & {id(n) for n in iter_nodes(sch.func.body)}
    assert shared


def test_sketch_matching_agrees_with_comparing_json(samples):
    for sp, schs in samples:
        sketches = sp.sketches
        for sch in schs:
            mine = structure(sch.trace)
            for sk in sketches:
                st = structure(sk.trace)
                want = len(mine) >= len(st) and mine[:len(st)] == st
                assert follows(sch.trace, sk.trace) == want
            # a trace of another workload follows none of them
        other = DesignSpace(ops.get("gemm", 32, 32, 32), TARGET).sample(1, seed=0)[0]
        if sp.workload.name != "gemm":
            assert sp.sketch_of(other.trace) is None


def test_compute_location_checks_equal_trying_the_primitive(samples):
    for _, schs in samples:
        for sch in schs:
            func = sch.func
            for name in index_of(func).order:
                r, _ = index_of(func).blocks[name]
                for loop in index_of(func).loops:
                    try:
                        block_prims.compute_at(func, name, loop)
                        ok = True
                    except ScheduleError:
                        ok = False
                    assert block_prims.can_compute_at(func, name, loop) == ok, (name, loop)
                try:
                    block_prims.compute_inline(func, name)
                    ok = True
                except ScheduleError:
                    ok = False
                assert block_prims.can_compute_inline(func, name) == ok


def test_injectivity_proof_never_contradicts_enumeration(samples):
    rng = random.Random(0)
    checked = 0
    for _, schs in samples:
        for sch in schs:
            for name, (r, path) in index_of(sch.func).blocks.items():
                loops = loops_of(path)
                for start in range(len(loops)):
                    inner = loops[start:]
                    if rng.random() < 0.5:
                        inner = [lp for lp in inner if rng.random() < 0.7]
                    if reduction_prims._distinct_keys(r, inner):
                        checked += 1
                        assert reduction_prims._enumerated_injective(r, inner)
    assert checked > 10


def test_cached_analyses_are_per_node_and_not_pickled():
    i, j = Var("i"), Var("j")
    e = simplify(FloorDiv(i * 4 + j, const(4)))
    assert expr_vars(e) == {"i", "j"}
    assert sym_bounds(e, {"j": (0, 3)}) == sym_bounds(e, {"j": (0, 3)})
    lo, hi = sym_bounds(i * 4 + j, {"j": (0, 3), "k": (0, 9)})
    assert (lo, hi) == sym_bounds(i * 4 + j, {"j": (0, 3)})      # k is not in the expression
    assert sym_bounds(i * 4 + j, {"j": (0, 7)})[1] != hi          # j's range is
    back = pickle.loads(pickle.dumps(e))
    assert back == e and not any(k.startswith("_") for k in vars(back))
    func = ops.get("gemm", 8, 8, 8).func
    index_of(func)
    again = pickle.loads(pickle.dumps(func))
    assert again == func and "_index" not in vars(again)


def test_round_cost_prints_every_stage():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "round_cost.py"), "--once",
                          "gemm", "-n", "2"], capture_output=True, text=True, check=True,
                         cwd=ROOT, timeout=300)
    import json
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(row) >= {"sample", "replay", "postproc", "apply", "lower", "features", "predict"}
    assert all(v > 0 and np.isfinite(v) for v in row.values())


def test_a_candidate_leaves_no_reference_cycles():
    """Sampling, mutating, replaying, lowering and extracting features leave nothing for
    the cycle collector: a candidate's nodes (and the analyses kept on them) are freed by
    reference counting as soon as it is dropped."""
    import gc
    from explorer.features import extract
    from explorer.lower import lower
    spaces = _spaces()
    for sp in spaces:
        sp.sketches          # noqa: B018 - built once, kept
    gc.collect()
    gc.disable()
    try:
        for sp in spaces:
            parents = sp.sample(3, seed=5)
            rng = random.Random(1)
            for p in parents:
                got = sp.mutate_valid(p.trace, rng)
                for sch in [p] + ([got[1]] if got else []):
                    extract(lower(sch), TARGET)
            del parents, got, sch
        assert gc.collect() == 0
    finally:
        gc.enable()


def _exprs(func):
    from explorer.ir.functor import walk_expr
    for node in iter_nodes(func.body):
        for value in vars(node).values():
            for e in (value if isinstance(value, tuple) else (value,)):
                if hasattr(e, "dtype") and not hasattr(e, "shape"):
                    yield from walk_expr(e)


def test_kept_linear_forms_and_hashes_equal_recomputing_them(samples):
    """simplify's results carry their linear form, and nodes keep their hash: both equal
    what computing them again gives (the form's term order too: it decides the order of
    the terms in every expression built from it)."""
    import dataclasses
    from explorer.ir import arith
    from explorer.lower import lower

    def fresh_hash(x):
        if isinstance(x, tuple):
            return hash(tuple(_Hashed(fresh_hash(e)) for e in x))
        if dataclasses.is_dataclass(x) and "_hash" in vars(x):
            return hash(tuple(_Hashed(fresh_hash(getattr(x, f.name)))
                              for f in dataclasses.fields(x) if f.compare))
        return hash(x)
    kept = 0
    for _, schs in samples:
        for sch in schs:
            low = lower(sch)
            for func in (sch.func, low):
                assert hash(func) == fresh_hash(func)
                for e in _exprs(func):
                    form = vars(e).get("_lin")
                    if form is not None:
                        kept += 1
                        again = arith._lin_of(e, None)
                        assert list(form[0].items()) == list(again[0].items())
                        assert form[1] == again[1]
    assert kept > 50


class _Hashed:
    """Stands for a value whose hash is already known (tuple hashing combines them)."""

    def __init__(self, h):
        self.h = h

    def __hash__(self):
        return self.h


def test_map_realizes_rebuilds_what_transform_stmt_rebuilds(samples):
    from explorer.ir.functor import REMOVE, transform_stmt
    from explorer.schedule.tree import map_realizes
    for _, schs in samples:
        for sch in schs:
            body = sch.func.body
            names = index_of(sch.func).order
            for drop in [None] + names:
                def fn(r, drop=drop):
                    if r.block.name == drop:
                        return REMOVE
                    return r.with_(predicate=r.predicate) if r.block.name == names[0] else None
                want = transform_stmt(body, lambda s: fn(s) if isinstance(s, BlockRealize)
                                      else None)
                got = map_realizes(body, fn)
                assert got == want
                if drop is None and len(names) > 1:
                    # the realizes fn kept are the same objects
                    kept = {id(n) for n in iter_nodes(got)}
                    assert id(index_of(sch.func).blocks[names[-1]][0]) in kept


def test_ranged_forms_kept_and_strides_from_forms_equal_recomputing_them(samples):
    """The linear forms kept per loop ranges on a node equal computing them again under
    those ranges; a node kept as its own simplification simplifies to an equal node; the
    strides read from an index's linear form equal those of the simplified index; and the
    samples these analyses built compute what numpy computes."""
    from explorer import build
    from explorer.ir import arith
    from explorer.lower import lower
    from explorer.ir.functor import collect_loads, substitute
    ranged = same = strides = 0
    for sp, schs in samples:
        for sch in schs:
            low = lower(sch)
            for func in (sch.func, low):
                for e in _exprs(func):
                    for key, form in vars(e).get("_lin_ranged", {}).items():
                        ranges = {n: r for n, r in zip(e._sorted_vars, key) if r is not None}
                        again = arith._lin_of(e, ranges)
                        assert list(form[0].items()) == list(again[0].items())
                        assert form[1] == again[1]
                        ranged += 1
                    if vars(e).get("_simple") is arith._SAME:
                        assert arith._simplify(e, None) == e
                        same += 1
            for name, (r, path) in index_of(sch.func).blocks.items():
                loops = loops_of(path)
                ranges = {lp.var.name: (0, lp.extent - 1) for lp in loops}
                bind = {iv.var.name: v for iv, v in zip(r.block.iter_vars, r.iter_values)}
                for idx in [r.block.body.indices] + [ld.indices for ld in
                                                     collect_loads(r.block.body.value)]:
                    for i in idx:
                        x = substitute(i, bind)
                        form = arith.simplified_form(x, ranges)
                        if form is None:
                            continue
                        for lp in loops:
                            assert arith.form_coeff(form, lp.var.name) == \
                                arith.linear_coeff(arith.simplify(x, ranges), lp.var.name)
                            strides += 1
            args = sp.workload.make_args(3)
            build(sch, "interp")(*args)
            sp.workload.check(args)
    assert ranged > 20 and same > 20 and strides > 100
