"""Multi-level tiling's read cache per reduction block (``ReuseConfig.streamed_levels``):
offered for a packed input larger than the target's L2, not for one within it, and its
draws compute the gemm (checked against numpy on this host's vector width and AVX2's)."""
import pytest

from explorer import Target, build, ops
from explorer.space.replay import without_decisions
from explorer.space import DesignSpace
from explorer.space.expert import _read_cache_level


def _levels(space) -> set:
    return {_read_cache_level(sk.trace) for sk in space.sketches}


@pytest.mark.parametrize("mcpu", ["host", "haswell"])
def test_block_pack_offered_beyond_the_l2_and_correct(mcpu):
    from explorer.target import host
    if mcpu == "haswell" and "+avx2" not in host.host_cpu()[1].split(","):
        pytest.skip("this host cannot run AVX2 code")
    cpu = "" if mcpu == "host" else f" -mcpu={mcpu}"
    wl = ops.gemm(32, 96, 384)                 # B: 144 KB
    within = DesignSpace(wl, Target(f"llvm{cpu} -l2-bytes={1 << 20}"))
    assert _levels(within) == {0, 1}
    target = Target(f"llvm{cpu} -l2-bytes=65536")
    space = DesignSpace(wl, target)
    assert _levels(space) == {0, 1, 3}
    assert len(space.sketches) > len(within.sketches)
    blocked = [sk.trace for sk in space.sketches if _read_cache_level(sk.trace) == 3]
    checked = 0
    for n, trace in enumerate(blocked):
        for seed in range(2):
            sch = space.apply(without_decisions(trace), seed=seed + 10 * n)
            if sch is None:
                continue
            args = wl.make_args(seed=seed)
            build(sch, target)(*args)
            wl.check(args)
            checked += 1
    assert checked >= len(blocked)


def test_block_pack_not_offered_for_a_small_batch_matmul():
    """The attention batch matmuls' operands (12 x 64 x 128 floats) fit the L2: unchanged."""
    space = DesignSpace(ops.batch_matmul(12, 128, 128, 64), Target("llvm"))
    assert 3 not in _levels(space)


def test_block_pack_not_offered_where_the_other_input_streams_too():
    """A (256 x 384 floats, 384 KB) beyond a 64 KB L2 as well as B: the copy per task is
    spread over many rows (gemm 1024^3's case), so the block copy is not offered; the same
    B with A within the L2 gets it."""
    target = Target("llvm -l2-bytes=65536")
    assert 3 not in _levels(DesignSpace(ops.gemm(256, 96, 384), target))
    assert 3 in _levels(DesignSpace(ops.gemm(16, 96, 384), target))
