"""Blocked layouts: transform_layout with factors (packed GEMM panels, NCHW[x]c weights and
activations, padding for factors that do not divide), its errors and trace round trip,
and the PackLayout rule that offers the packed panel to the search."""
import pytest

from explorer import Schedule, ScheduleError, Target, Trace, build, ops
from explorer.errors import ExplorerError, TraceError
from explorer.ir.functor import walk_stmt
from explorer.ir.stmt import BlockRealize, For
from explorer.lower import lower
from explorer.schema import validate_trace_json
from explorer.space import DesignSpace
from explorer.space.rules import MultiLevelTiling, PackLayout
from explorer.space.rules.pack_layout import pack_plan

from test_space_rules import CPU, LLVM   # the host target; does LLVM build here


def check(sch, wl, seed: int = 0) -> None:
    """The schedule equals numpy on the interpreter, and through LLVM where it builds;
    its trace round-trips through JSON and the printed Python to the same function."""
    for target in ("interp", CPU) if LLVM else ("interp",):
        args = wl.make_args(seed)
        build(sch, target)(*args)
        assert wl.check(args) < 1e-3
    again = Trace.from_json(sch.trace.dumps()).apply_to(Schedule(wl, seed=sch.seed))
    assert again.func == sch.func
    sch2 = Schedule(wl, seed=sch.seed)
    exec("\n".join(sch.trace.as_python()), {"sch": sch2})
    assert sch2.func == sch.func


def alloc_shape(sch, name: str) -> tuple:
    return next(b.shape for b in sch.func.alloc_buffers if b.name == name)


def packed_gemm(M=32, N=64, K=24, tile=32, factor=16):
    """B copied per column tile and stored as panels B_global[n // factor, k, n % factor]."""
    wl = ops.gemm(M, N, K)
    sch = Schedule(wl, seed=1)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    jo, ji = sch.split(j, [None, tile])
    sch.reorder(jo, i, k, ji)
    b = sch.cache_read(c, 1, "global")
    sch.compute_at(b, jo)
    sch.transform_layout(c, ("read", 1), [1, 0, 2], factors=[None, factor])
    return wl, sch


# ------------------------------------------------------------ the primitive

def test_gemm_with_packed_panels_of_b_equals_numpy():
    wl, sch = packed_gemm()
    assert alloc_shape(sch, "B_global") == (4, 24, 16)
    check(sch, wl)
    # lowered: the copy is compacted to the tile's two panels, read at [j_1 // 16, k, j_1 % 16]
    text = lower(sch.func).script()
    assert 'B_global = alloc([2, 24, 16]' in text
    inst = sch.trace.insts[-1]
    assert inst.kind == "transform_layout" and inst.inputs[3] == [None, 16]


def test_panel_as_wide_as_the_vector_loop_is_contiguous_and_vectorized():
    wl = ops.gemm(16, 64, 8)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    jo, jm, ji = sch.split(j, [None, 2, 16])
    sch.reorder(jo, i, k, jm, ji)
    b = sch.cache_read(c, 1, "global")
    sch.compute_at(b, jo)
    sch.transform_layout(c, ("read", 1), [1, 0, 2], factors=[None, 16])
    sch.vectorize(ji)
    text = lower(sch.func).script()
    assert "B_global[j_1, k, j_2]" in text       # // and % resolved by the loop ranges
    check(sch, wl)


def test_conv_with_blocked_weights_and_nchwc_activations_equals_numpy():
    wl = ops.conv2d(1, 8, 6, 6, 16, 3, 3, padding=1)
    sch = Schedule(wl, seed=2)
    conv = sch.get_block("conv")
    w = sch.cache_read(conv, 1, "global")                # W_global, a copy of W
    sch.compute_at(w, sch.get_loops(conv)[1])            # per output channel... then blocked:
    # W[k, c, r, s] -> W_p[k // 8, c // 4, r, s, c % 4, k % 8]
    sch.transform_layout(conv, ("read", 1), [0, 2, 4, 5, 3, 1], factors=[8, 4, None, None])
    # the padded input NCHW -> NCHW[4]c: pad_p[n, c // 4, h, w, c % 4]
    sch.transform_layout(conv, ("read", 0), [0, 1, 3, 4, 2], factors=[None, 4, None, None])
    assert alloc_shape(sch, "W_global") == (2, 2, 3, 3, 4, 8)
    assert alloc_shape(sch, "pad") == (1, 2, 8, 8, 4)
    check(sch, wl)


def test_factor_that_does_not_divide_pads_the_copy_and_stays_in_bounds():
    wl, sch = packed_gemm(M=8, N=100, K=12, tile=20, factor=16)
    assert alloc_shape(sch, "B_global") == (7, 12, 16)    # ceil(100 / 16) panels
    check(sch, wl, seed=3)
    wl, sch = packed_gemm(M=8, N=100, K=12, tile=20, factor=128)   # wider than the dim
    assert alloc_shape(sch, "B_global") == (1, 12, 100)
    check(sch, wl, seed=4)


def test_a_factor_may_be_a_sampled_value():
    wl = ops.gemm(16, 64, 8)
    sch = Schedule(wl, seed=5)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    v = sch.sample_categorical([8, 16, 32], [0.2, 0.3, 0.5], decision=1)
    b = sch.cache_read(c, 1, "global")
    sch.transform_layout(c, ("read", 1), [1, 0, 2], factors=[None, v])
    assert alloc_shape(sch, "B_global") == (4, 8, 16)
    check(sch, wl)
    j = sch.trace.as_json()
    assert j["insts"][-1][1][3] == [None, "$v4"]


def test_a_permutation_keeps_its_three_input_record():
    wl = ops.gemm(8, 12, 4)
    sch = Schedule(wl)
    c = sch.get_block("C")
    sch.cache_read(c, 1, "global")
    sch.transform_layout(c, ("read", 1), [1, 0])
    assert len(sch.trace.insts[-1].inputs) == 3
    check(sch, wl)


@pytest.mark.parametrize("factors, axes, match", [
    ([None, 0], [1, 0, 2], r"the factor of dimension 1 of B_global \[24, 64\] must be an int "
                           r">= 1 or None, not 0"),
    ([None, -16], [1, 0, 2], r"the factor of dimension 1 of .* or None, not -16"),
    ([None, 2.5], [1, 0, 2], r"the factor of dimension 1 of .* or None, not 2.5"),
    ([16], [1, 0, 2], r"factors must be a list of 2 entries for B_global"),
    ([None, 16], [1, 0], r"axes must be a permutation of 0..2 for B_global \[24, 64\] "
                         r"\(its 3 dimensions after splitting by \[None, 16\]\)"),
    ([None, 16], [1, 1, 0], r"axes must be a permutation of 0..2"),
])
def test_bad_blocking_maps_are_refused_and_leave_the_schedule_unchanged(factors, axes, match):
    wl = ops.gemm(32, 64, 24)
    sch = Schedule(wl)
    c = sch.get_block("C")
    sch.cache_read(c, 1, "global")
    before, n = sch.func, len(sch.trace)
    with pytest.raises(ScheduleError, match="transform_layout: " + match):
        sch.transform_layout(c, ("read", 1), axes, factors=factors)
    assert sch.func == before and len(sch.trace) == n


def test_a_parameter_cannot_be_blocked():
    sch = Schedule(ops.gemm(32, 64, 24))
    c = sch.get_block("C")
    with pytest.raises(ScheduleError, match=r"B is a parameter of 'gemm'; its layout is the "
                                            r"caller's"):
        sch.transform_layout(c, ("read", 1), [1, 0, 2], factors=[None, 16])


def test_trace_json_checks_the_factors():
    _, sch = packed_gemm()
    good = sch.trace.as_json()
    validate_trace_json(good)
    bad = dict(good, insts=[list(x) for x in good["insts"]])
    bad["insts"][-1] = ["transform_layout", [bad["insts"][-1][1][0], ["read", 1], [1, 0, 2],
                                             [None, 0]], {}, []]
    with pytest.raises(TraceError, match=r"transform_layout\) input 3: expected a list of 1 to"):
        validate_trace_json(bad)
    bad["insts"][-1][1] = bad["insts"][-1][1][:2]
    with pytest.raises(TraceError, match=r"takes 4 inputs \(block, which, axes, factors\), "
                                         r"got 2"):
        validate_trace_json(bad)


# ------------------------------------------------------------ the rule

def space(wl, target=CPU, rule=None) -> DesignSpace:
    """The default space with PackLayout right after multi-level tiling (whether or not
    the defaults hold it already), by default for operands of any size."""
    sp = DesignSpace(wl, target)
    rules = [r for r in sp.rules if not isinstance(r, PackLayout)]
    at = next(i + 1 for i, r in enumerate(rules) if isinstance(r, MultiLevelTiling))
    rule = PackLayout(min_bytes=0) if rule is None else rule
    return DesignSpace(wl, target, rules=rules[:at] + [rule] + rules[at:])


def blocked(trace) -> list:
    return [i for i in trace.insts if i.kind == "transform_layout" and len(i.inputs) == 4]


def test_rule_blocks_the_packed_copy_by_the_register_tile():
    wl = ops.gemm(32, 64, 16)
    sp = space(wl)
    sketches = [s.trace for s in sp.sketches]
    packed = [t for t in sketches if blocked(t)]
    cached = [t for t in sketches if any(i.kind == "cache_read" for i in t.insts)]
    assert packed and len(packed) * 2 == len(cached)      # "may": with and without
    for t in packed:
        (ins,) = blocked(t)
        factor = ins.inputs[3][-1]
        tile = next(i for i in t.insts if i.kind == "sample_perfect_tile"
                    and i.outputs[-1] is factor)             # j's innermost tile factor
        assert tile.inputs[1] == 4
    assert sp.rule_errors == []


def test_rule_decision_is_sampled_and_replayable():
    wl = ops.gemm(32, 64, 16)
    a = [s.trace.dumps() for s in space(wl).sample(16, seed=7)]
    b = [s.trace.dumps() for s in space(wl).sample(16, seed=7)]
    assert a == b
    c = [s.trace.dumps() for s in space(wl).sample(16, seed=8)]
    assert a != c


def test_packed_candidates_appear_among_samples_and_equal_numpy():
    wl = ops.gemm(32, 64, 16)
    sp = space(wl)
    samples = sp.sample(24, seed=3)
    packed = [s for s in samples if blocked(s.trace)]
    assert 0 < len(packed) < len(samples)
    vectorized = 0
    for s in packed[:4]:
        check(s, wl)
        path = next(p for n, p in walk_stmt(s.func.body)
                    if isinstance(n, BlockRealize) and n.block.name == "C")
        inner = [lp for lp in path if isinstance(lp, For)][-1]
        vectorized += inner.kind == "vectorized"
    assert vectorized >= 1       # the blocked copy does not stop the vector loop


def test_mutated_tile_keeps_a_packed_trace_valid():
    wl = ops.gemm(32, 64, 16)
    sp = space(wl)
    s = next(s for s in sp.sample(24, seed=3) if blocked(s.trace))
    t = s.trace
    factor = blocked(t)[0].inputs[3][-1]
    idx = next(n for n, i in enumerate(t.insts) if i.kind == "sample_perfect_tile"
               and i.outputs[-1] is factor)
    for d in ([1, 2, 4, 8], [4, 1, 1, 16], [2, 2, 2, 8]):
        sch = sp.apply(t.with_decision(idx, d))
        assert sch is not None, sp.last_error
        assert alloc_shape(sch, "B_global")[-1] == d[-1]    # the panel follows the tile
        check(sch, wl)


def test_rule_packs_the_weight_of_the_channel_vectorized_conv():
    wl = ops.conv2d(1, 4, 7, 7, 32, 3, 3, padding=1)        # 7 columns: channel sketch
    sp = space(wl, Target("llvm -mcpu=skylake-avx512 -num-cores=2"))
    packed = [s for s in sp.sketches if blocked(s.trace)]
    assert packed
    for s in packed:                                          # only the weight's copy
        shape = alloc_shape(s, "W_global")                    # [k // k3, c, r, s, k % k3]
        assert len(shape) == 5 and shape[1:4] == (4, 3, 3) and shape[0] * shape[4] >= 32
        assert len(alloc_shape(s, "pad")) == 4                # the padding is not blocked
    sch = sp.apply(Trace(packed[0].trace.insts, {}), seed=1)
    assert sch is not None, sp.last_error
    check(sch, wl)


def test_rule_leaves_gpu_and_untiled_blocks_alone():
    wl = ops.gemm(32, 64, 16)
    assert not any(blocked(s.trace) for s in space(wl, Target("cuda")).sketches)
    assert pack_plan(Schedule(wl).func, "C") is None        # not tiled
    ew = ops.elementwise(8, 8)
    assert not any(blocked(s.trace) for s in space(ew).sketches)


def test_show_says_the_packing_copy_is_timed_inside_the_kernel(tmp_path, capsys):
    from explorer import cli
    from explorer.database import Database, TuningRecord
    wl, packed = packed_gemm()
    check(packed, wl)
    db = Database(tmp_path / "db")
    db.commit_workload(wl)
    db.commit_record(TuningRecord(wl.key, "llvm", packed.trace.as_json(), (1e-4,), trial=0))
    assert cli.main(["show", "--db", str(tmp_path / "db")]) == 0
    out = capsys.readouterr().out
    assert "packed layout (transform_layout with factors): the copy that packs runs inside " \
           "the kernel, its time is in 'best ms'" in out
    plain = Schedule(wl)
    db.commit_record(TuningRecord(wl.key, "llvm", plain.trace.as_json(), (1e-5,), trial=1))
    assert cli.main(["show", "--db", str(tmp_path / "db")]) == 0
    assert "packed layout" not in capsys.readouterr().out     # the best is not packed


def test_rule_applies_where_the_copied_operand_does_not_fit_in_l2():
    wl = ops.gemm(32, 64, 16)                                  # B: 4 KiB
    assert not any(blocked(s.trace) for s in space(wl, rule=PackLayout()).sketches)
    small_l2 = Target("llvm -num-cores=2", l2_bytes=2048)
    assert any(blocked(s.trace) for s in space(wl, small_l2, PackLayout()).sketches)
    assert not any(blocked(s.trace)
                   for s in space(wl, small_l2, PackLayout(min_bytes=4096)).sketches)
    with pytest.raises(ExplorerError, match=r"min_bytes must be an int >= 0"):
        PackLayout(min_bytes=-1)


@pytest.mark.parametrize("stride", [1, 2])
def test_torch_baseline_of_a_depthwise_layer_equals_numpy(stride):
    """The depthwise layers benchmarks/layouts.py times against PyTorch (when installed)."""
    pytest.importorskip("torch")
    from explorer.measure.baselines import torch_impl
    wl = ops.get("depthwise_conv2d", N=1, C=16, H=9, W=9, R=3, S=3, stride=stride, padding=1)
    args = wl.make_args(0)
    torch_impl("depthwise_conv2d", dict(wl.params), args)()
    assert wl.check(args) < 1e-4
