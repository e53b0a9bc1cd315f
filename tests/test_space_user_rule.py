"""A user extends a space with one class: the worked examples (explorer.space.examples)
change the space exactly as their documentation says."""
import pytest

from explorer import Target, build, lower, ops
from explorer.space import DesignSpace, ScheduleRule
from explorer.space.defaults import default_rules
from explorer.space.rules import MemoryBoundTiling
from explorer.space.examples import PackOperand, VectorizeInnermost
from explorer.space.validate import check_on_interp

CPU = Target("llvm -num-cores=2")
CPU4 = Target("llvm -num-cores=2 -vector_bits=128")   # 4 fp32 lanes: fits small shapes


def test_vectorize_innermost_splits_by_the_vector_width():
    wl = ops.elementwise(6, 8)
    plain = DesignSpace(wl, CPU4)
    ruled = DesignSpace(wl, CPU4).add_rule(VectorizeInnermost())
    assert len(ruled.sketches) == len(plain.sketches) and ruled.size() == plain.size()
    (before,), (after,) = plain.sketches, ruled.sketches
    extra = after.trace.insts[len(before.trace.insts):]
    assert [i.kind for i in extra] == ["get_loops", "split", "vectorize"]
    assert extra[1].inputs[1] == [None, 4]
    for sch in ruled.sample(3, seed=0):
        assert "vectorized(4)" in sch.script()
        check_on_interp(sch, wl)
    assert "vectorized(48)" in plain.sample(1)[0].script()   # 6 x 8 fused: within 64 lanes
    big = ops.elementwise(1024, 1024)
    avx512 = Target("llvm -num-cores=2 -vector_bits=512")
    # the default space now vectorizes it itself (MemoryBoundTiling): the example is shown
    # on the default rules without that one
    rules = [r for r in default_rules(avx512) if not isinstance(r, MemoryBoundTiling)]
    assert "vectorized" not in DesignSpace(big, avx512, rules=rules).sample(1)[0].script()
    ruled = DesignSpace(big, avx512, rules=rules).add_rule(VectorizeInnermost())
    ruled = ruled.sample(1)[0].script()
    assert "for i in parallel(1024)" in ruled and "vectorized(16)" in ruled


def test_vectorize_innermost_leaves_tiled_and_strided_blocks_alone():
    gemm = ops.gemm(8, 8, 8)
    assert (DesignSpace(gemm, CPU4).add_rule(VectorizeInnermost()).sketch_traces()
            == DesignSpace(gemm, CPU4).sketch_traces())
    odd = ops.elementwise(6, 10)            # 10 is no multiple of 4
    assert (DesignSpace(odd, CPU4).add_rule(VectorizeInnermost()).sketch_traces()
            == DesignSpace(odd, CPU4).sketch_traces())
    softmax = ops.softmax(4, 8)             # four blocks: each untiled one is vectorized
    space = DesignSpace(softmax, CPU4).add_rule(VectorizeInnermost())
    for sch in space.sample(6, seed=1):
        check_on_interp(sch, softmax)


def test_pack_operand_adds_a_copy_per_outer_tile():
    wl = ops.gemm(16, 64, 24)
    plain = DesignSpace(wl, CPU)
    packed = DesignSpace(wl, CPU).add_rule(PackOperand("A"))
    assert len(packed.sketches) == len(plain.sketches) and packed.size() == plain.size()
    for before, after in zip(plain.sketches, packed.sketches):
        extra = after.trace.insts[len(before.trace.insts):]
        assert [i.kind for i in extra] == ["get_loops", "cache_read", "compute_at",
                                           "annotate", "annotate"]
        assert extra[1].inputs[1:] == (0, "global")
    for sch in packed.sample(6, seed=0):
        low = lower(sch).script()
        alloc = next(line for line in low.splitlines() if "A_global = alloc" in line)
        rows, cols = eval(alloc.split("alloc(")[1].split("]")[0] + "]")
        i_tiles = next(d for d in sch.trace.decisions.values() if isinstance(d, list)
                       and len(d) == 4 and d[0] * d[1] * d[2] * d[3] == 16)
        assert (rows, cols) == (16 // i_tiles[0], 24)   # the rows of one outer i tile
        check_on_interp(sch, wl)


def test_pack_operand_leaves_other_blocks_alone():
    for wl in (ops.softmax(4, 8), ops.elementwise(4, 8)):
        plain = DesignSpace(wl, CPU).sketch_traces()
        assert DesignSpace(wl, CPU).add_rule(PackOperand("A")).sketch_traces() == plain


def test_user_rule_samples_run_on_llvm():
    wl = ops.gemm(32, 64, 48)
    space = DesignSpace(wl, CPU).add_rule(PackOperand("A")).add_rule(VectorizeInnermost())
    for sch in space.sample(3, seed=2):
        args = wl.make_args(0)
        build(sch, "llvm")(*args)      # llvmlite is a dependency: a failure is a bug
        wl.check(args)


def test_a_user_rule_is_one_class():
    class SplitByFour(ScheduleRule):
        """Split every innermost loop by 4 and vectorize the inner part."""

        def apply(self, sch, block):
            loops = sch.get_loops(block)
            if loops:
                _, inner = sch.split(loops[-1], [None, 4])
                sch.vectorize(inner)
            return [sch]

    wl = ops.elementwise(6, 8)
    (sch,) = DesignSpace(wl, CPU, rules=[SplitByFour()]).sample(1)
    assert "vectorized(4)" in sch.script()
    check_on_interp(sch, wl)
