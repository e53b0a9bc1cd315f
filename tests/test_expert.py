"""Expert schedules: points of the default CPU space, correct, and fast on LLVM."""
import json
import os
import subprocess
import sys

import pytest

from explorer import Target, Trace, build, lower, ops
from explorer.ir.functor import walk_stmt
from explorer.ir.stmt import For
from explorer.space import DesignSpace, SpaceError
from explorer.space.expert import SUPPORTED, expert_schedule, expert_trace
from explorer.space.validate import check_on_interp

# long runs: marked slow, and run only with EXPLORER_SLOW=1 (pytest runs every marker)
needs_slow = pytest.mark.skipif(not os.environ.get("EXPLORER_SLOW"),
                                reason="a long run: set EXPLORER_SLOW=1")


CASES = [ops.gemm(8, 12, 10), ops.gemm(64, 96, 40), ops.batch_matmul(2, 6, 8, 5),
         ops.batch_matmul(3, 16, 32, 24), ops.dense_bias_relu(6, 8, 10),
         ops.dense_bias_relu(24, 48, 32), ops.conv2d(1, 3, 7, 6, 4, 3, 3),
         ops.conv2d(1, 4, 8, 8, 8, 3, 3, padding=1), ops.conv2d(2, 3, 9, 9, 4, 3, 3, stride=2),
         ops.depthwise_conv2d(1, 5, 9, 9, 3, 3, stride=2, padding=1),
         ops.depthwise_conv2d(1, 6, 13, 13, 3, 3, stride=1, padding=1)]


@pytest.mark.parametrize("wl", CASES, ids=lambda w: w.key)
def test_expert_trace_is_a_point_of_the_default_space(wl):
    trace = expert_trace(wl)
    space = DesignSpace(wl, "llvm")
    assert space.sketch_of(trace) is not None
    assert set(trace.decisions) == set(trace.sampling_indices())   # every choice made
    again = Trace.from_json(json.dumps(trace.as_json()))
    sch = space.apply(again)
    assert sch is not None, space.last_error
    assert sch.script() == expert_schedule(wl).script()
    check_on_interp(sch, wl)


@pytest.mark.parametrize("wl", CASES[1::2] + [ops.resnet18_conv("C12")], ids=lambda w: w.key)
def test_expert_schedules_are_correct_on_llvm(wl):
    args = wl.make_args(1)
    build(expert_schedule(wl), "llvm")(*args)
    wl.check(args)


def test_expert_gemm_has_the_fast_shape():
    # an AVX-512 CPU named, so the shape is the same on any host (the tile follows the
    # target's vector registers: see test_expert_register_tiles_fit_the_targets_registers)
    sch = expert_schedule(ops.gemm(1024, 1024, 1024),
                          Target("llvm -mcpu=skylake-avx512 -num-cores=2"))
    low = lower(sch)
    loops = {n.var.name: n for n, _ in walk_stmt(low.body) if isinstance(n, For)}
    kinds = {(n.kind, n.extent) for n in loops.values()}
    assert ("vectorized", 64) in kinds and ("unrolled", 4) in kinds
    outer = low.body
    assert isinstance(outer, For) and outer.kind == "parallel" and outer.extent == 16
    allocs = [line.strip() for line in low.script().splitlines() if "alloc(" in line]
    assert allocs == ['B_global = alloc([1024, 64], "float32", scope="global")',   # B panel
                      'C_local = alloc([4, 64], "float32", scope="local")']   # 16 zmm registers
    assert "if " not in low.script()          # init decomposed, no guards


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=skylake-avx512 -num-cores=2",
                                    "llvm -mcpu=haswell -num-cores=2"])
def test_channel_conv_expert_reads_its_padding_inline(target):
    """The channel-vectorized conv reads the input through the padding's select: no padded
    copy at the root, so one parallel region per call (ResNet-18 C2-C12 min of interleaved
    2-thread runs on a loaded Zen 5: 1-9% faster inline). Other plans keep the root."""
    from explorer.space.expert import INLINE, ROOT
    wl = ops.conv2d(1, 16, 14, 14, 32, 3, 3, stride=2, padding=1)    # 7 output columns
    trace = expert_trace(wl, target)
    assert "transform_layout" in {i.kind for i in trace.insts}     # the channel sketch
    locs = [trace.decisions[i] for i in trace.sampling_indices()
            if trace.insts[i].kind == "sample_compute_location"]
    assert locs == [INLINE]
    sch = expert_schedule(wl, target)
    assert "pad = alloc" not in lower(sch).script()
    if target == "llvm":
        args = wl.make_args(2)
        build(sch, target)(*args)
        wl.check(args)
    gemm = expert_trace(ops.conv2d(1, 4, 8, 16, 8, 3, 3, padding=1), target)   # 16 columns
    assert "transform_layout" not in {i.kind for i in gemm.insts}
    assert [gemm.decisions[i] for i in gemm.sampling_indices()
            if gemm.insts[i].kind == "sample_compute_location"] == [ROOT]


def test_unsupported_operators_say_what_exists():
    with pytest.raises(SpaceError, match="expert schedules exist for gemm, batch_matmul"):
        expert_trace(ops.softmax(4, 8))
    with pytest.raises(SpaceError, match="NCHW"):
        expert_trace(ops.conv2d(1, 3, 7, 6, 4, 3, 3, layout="NHWC"))
    with pytest.raises(SpaceError, match="llvm"):
        expert_trace(ops.gemm(8, 8, 8), "cuda")
    assert SUPPORTED == ("gemm", "batch_matmul", "dense_bias_relu", "conv2d",
                         "conv2d_bias_relu", "gemm_bias_gelu", "depthwise_conv2d")


BENCH = r"""
import json, sys, time, numpy as np
from explorer import ops, build
from explorer.space.expert import expert_schedule
what, n, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
wl = ops.gemm(n, n, n)
a = wl.make_args(0)
if what == "numpy":
    f = lambda: a[0] @ a[1]
else:
    k = build(expert_schedule(wl), "llvm")
    f = lambda: k(*a)
for _ in range(3): f()
ts = []
for _ in range(reps):
    t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
print(json.dumps(wl.flops / min(ts) / 1e9))
"""


@pytest.mark.slow
@needs_slow
def test_expert_gemm_1024_reaches_70_percent_of_numpy(record_property):
    """Separate processes, interleaved, best of each (the machine is shared)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    best = {"numpy": 0.0, "expert": 0.0}
    for _ in range(5):
        for what in best:
            out = subprocess.run([sys.executable, "-c", BENCH, what, "1024", "20"], env=env,
                                 capture_output=True, text=True, check=True)
            best[what] = max(best[what], json.loads(out.stdout))
    ratio = best["expert"] / best["numpy"]
    record_property("gflops", best)
    print(f"\ngemm 1024: expert {best['expert']:.1f} GFLOP/s, numpy {best['numpy']:.1f}, "
          f"{ratio:.0%}")
    assert ratio >= 0.7


@pytest.mark.parametrize("mcpu,lanes,budget,gemm_budget",
                         [("haswell", 8, 12, 12), ("skylake-avx512", 16, 16, 24)])
def test_expert_register_tiles_fit_the_targets_registers(mcpu, lanes, budget, gemm_budget):
    """The expert's tiles come from the target: an AVX2 CPU gets 8-lane vectors and at
    most 12 accumulators (AVX-512's 4 x 64 tile there needs 32 of its 16 registers:
    44 GFLOP/s against 90 for the budgeted tile, gemm 1024 compiled for haswell); a gemm's
    register tile up to three quarters of the registers (24 of AVX-512's 32)."""
    from explorer.space.expert import _tile_plan
    from explorer.target import Target
    target = Target(f"llvm -mcpu={mcpu}")
    for wl in (ops.get("gemm", 1024, 1024, 1024), ops.get("gemm", 96, 48, 64),
               ops.resnet18_conv("C6")):
        plan = _tile_plan(wl, target)
        if wl.name == "gemm":
            rows, cols = plan["i"][3], plan["j"][3]
            assert rows * -(-cols // lanes) <= gemm_budget, (wl.key, plan)
        else:
            k3, p3, q3 = plan["k"][3], plan["p"][3], plan["q"][3]
            assert k3 * p3 * -(-q3 // lanes) <= budget, (wl.key, plan)


@pytest.mark.parametrize("mcpu,tile", [("skylake-avx512", (8, 48)), ("haswell", (4, 24))])
def test_expert_gemm_takes_the_tile_with_the_most_accumulators(mcpu, tile):
    """BERT-base's GEMMs (M = 128, N = 768): 8 rows x 3 vectors (24 zmm) on AVX-512, 4 x 3
    (12 ymm) on AVX2, where the first width that fits gave 4 x 4 and 2 x 4 (one Xeon core,
    against PyTorch: 0.88 -> 0.97x; AVX2 target 0.56 -> 0.63x); gemm 1024, which no
    24-accumulator tile divides, keeps AVX-512's 4 x 64. The cores and the L2 are given,
    not the host's: with two cores of a 2 MiB L2 each core's half of B (1.2 MB) fits and
    the column tiles are all outer; with a 1 MiB L2 (a Zen 5) it does not, and the column
    tiles are grouped into packed panels (``_streamed_panel``) around the same register
    tile."""
    from explorer.space.expert import _tile_plan
    target = Target(f"llvm -mcpu={mcpu}", num_cores=2, l2_bytes=2 << 20)
    plan = _tile_plan(ops.gemm(128, 768, 768), target)
    assert (plan["i"][3], plan["j"][3]) == tile
    assert (plan["i"][1] * plan["i"][2], plan["j"][0]) == (128 // tile[0], 768 // tile[1])
    small = _tile_plan(ops.gemm(128, 768, 768), target.with_(l2_bytes=1 << 20))
    assert (small["i"][3], small["j"][3]) == tile
    assert small["j"][0] * small["j"][1] == 768 // tile[1] and small["j"][1] > 1
    if mcpu == "skylake-avx512":
        plan = _tile_plan(ops.gemm(1024, 1024, 1024), target)
        assert (plan["i"][3], plan["j"][3]) == (4, 64)


@pytest.mark.parametrize("mcpu", ["host", "haswell"])
def test_expert_24_accumulator_tiles_are_correct(mcpu):
    """The wider tiles (8 x 48 on AVX-512, 4 x 24 on AVX2) of a BERT-like gemm, with a
    reduction of several blocks, checked against numpy on each target this host runs."""
    from explorer.target import host
    if mcpu == "haswell" and "+avx2" not in host.host_cpu()[1].split(","):
        pytest.skip("this host cannot run AVX2 code")
    target = Target("llvm" if mcpu == "host" else f"llvm -mcpu={mcpu}")
    wl = ops.gemm(32, 96, 192)
    sch = expert_schedule(wl, target)
    args = wl.make_args(seed=1)
    build(sch, target)(*args)
    wl.check(args)


def test_expert_for_an_avx2_target_is_correct():
    from explorer.target import Target, host
    if "+avx2" not in host.host_cpu()[1].split(","):
        pytest.skip("this host cannot run AVX2 code")
    target = Target("llvm -mcpu=haswell")
    wl = ops.get("gemm", 64, 96, 32)
    sch = expert_schedule(wl, target)
    args = wl.make_args(seed=0)
    build(sch, target)(*args)
    wl.check(args)


@pytest.mark.parametrize("mcpu", ["host", "haswell"])
def test_expert_packs_wide_panels_of_a_streamed_b_with_a_short_reduction_block(mcpu):
    """A gemm whose B (the share of one core) is larger than the L2 while A fits it: each
    task packs a panel of several register-tile columns within ``PANEL_SHARE`` of the L2,
    and the reduction runs in blocks the micro-kernel unrolls whole (``UNROLL_STEP`` / rows),
    checked against numpy; with an L2 that holds B, with B shared by enough cores, or with
    A streaming too (gemm 1024^3), the plan is the one without."""
    from explorer.target import host
    from explorer.space.expert import UNROLL_STEP, _tile_plan
    from explorer.space.register_tiles import PANEL_SHARE
    if mcpu == "haswell" and "+avx2" not in host.host_cpu()[1].split(","):
        pytest.skip("this host cannot run AVX2 code")
    cpu = "" if mcpu == "host" else f" -mcpu={mcpu}"
    l2 = 512 << 10
    small_l2 = Target(f"llvm{cpu} -num-cores=1 -l2-bytes={l2}")
    wl = ops.gemm(32, 384, 384)     # B 576 KB
    plan = _tile_plan(wl, small_l2)
    rows, cols, width = plan["i"][3], plan["j"][3], plan["j"][1]
    assert plan["k"] == [384 // (UNROLL_STEP // rows), UNROLL_STEP // rows], plan
    panel = 4 * 384 * cols * width
    assert width > 1 and panel <= PANEL_SHARE * l2 < 2 * panel, plan
    sch = expert_schedule(wl, small_l2)
    args = wl.make_args(seed=2)
    build(sch, small_l2)(*args)
    wl.check(args)
    plain = _tile_plan(wl, Target(f"llvm{cpu} -num-cores=1 -l2-bytes={8 << 20}"))
    assert plain["k"] == [6, 64] and plain["j"][1] == 1, plain
    # four cores read a quarter of B each (144 KB): within the L2
    assert _tile_plan(wl, Target(f"llvm{cpu} -num-cores=4 -l2-bytes={l2}")) == plain
    big = ops.gemm(1024, 1024, 1024)      # A 4 MB streams too
    assert _tile_plan(big, small_l2) == _tile_plan(
        big, Target(f"llvm{cpu} -num-cores=1 -l2-bytes={64 << 20}"))


def test_expert_streamed_panel_takes_an_a_within_the_cores_l2s_together():
    """An A beyond one core's L2 but within the L2s of the cores together (BERT's ffn_down
    on a 1.25 MB L2: A 1.5 MB) still takes the short unrolled reduction blocks, checked
    against numpy; on one core, or with A beyond all the L2s, the plan is the one without."""
    from explorer.space.expert import UNROLL_STEP, _tile_plan
    l2 = 256 << 10
    wl = ops.gemm(32, 384, 3072)          # A 384 KB, B 4.5 MB
    two = Target(f"llvm -num-cores=2 -l2-bytes={l2}")
    plan = _tile_plan(wl, two)
    rows = plan["i"][3]
    assert plan["k"] == [3072 // (UNROLL_STEP // rows), UNROLL_STEP // rows], plan
    assert plan["j"][0] >= 2, plan
    sch = expert_schedule(wl, two)
    args = wl.make_args(seed=5)
    build(sch, two)(*args)
    wl.check(args)
    one = _tile_plan(wl, Target(f"llvm -num-cores=1 -l2-bytes={l2}"))
    assert one["k"][1] == 64 and one["k"] != plan["k"], one
    tight = _tile_plan(wl, Target(f"llvm -num-cores=2 -l2-bytes={128 << 10}"))
    assert tight["k"][1] == 64, tight


def test_expert_reads_a_batch_matmul_b_within_the_l1_in_place():
    """A batch_matmul whose B (one batch, K x N) fits the L1 is read in place (no packed
    copy), checked against numpy; with an L1 smaller than B it is packed per task."""
    from explorer.space.expert import _tile_plan
    wl = ops.batch_matmul(2, 16, 64, 32)      # B 32 x 64 floats: 8 KB a batch
    roomy, tight = Target("llvm -l1-bytes=16384"), Target("llvm -l1-bytes=4096")
    assert _tile_plan(wl, roomy).get("_packed") is False
    assert "_packed" not in _tile_plan(wl, tight)
    for target, copied in ((roomy, False), (tight, True)):
        sch = expert_schedule(wl, target)
        assert ("Y_global" in str(lower(sch.func))) == copied     # B is Y here
        args = wl.make_args(seed=4)
        build(sch, target)(*args)
        wl.check(args)
