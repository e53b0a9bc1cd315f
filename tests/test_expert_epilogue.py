"""Expert schedules of the fused epilogues: points of the default space, the epilogue on
the register tile, correct on LLVM, and what the tuner measures first."""
import json
import math

import pytest

from explorer import Target, Trace, build, lower, ops
from explorer.database import Database
from explorer.space import DesignSpace, SpaceError
from explorer.space.expert import _tile_plan, _write_cache_level, expert_schedule, expert_trace
from explorer.space.expert_epilogue import EPILOGUE_OPS, epilogue_trace, main_nest
from explorer.space.validate import check_on_interp
from explorer.tune import Tuner

AVX512 = Target("llvm -mcpu=skylake-avx512 -num-cores=2")
AVX2 = Target("llvm -mcpu=haswell -num-cores=2")
CASES = [ops.conv2d_bias_relu(1, 4, 8, 8, 8, 3, 3, padding=1),
         ops.conv2d_bias_relu(2, 3, 9, 9, 4, 3, 3, stride=2),
         ops.conv2d_bias_relu(1, 16, 14, 14, 32, 3, 3, padding=1),
         ops.gemm_bias_gelu(6, 8, 10), ops.gemm_bias_gelu(24, 48, 32),
         ops.gemm_bias_gelu(64, 192, 96)]
ACTIVATION = {"conv2d_bias_relu": "relu", "gemm_bias_gelu": "gelu"}


def _kinds(trace) -> list:
    return [i.kind for i in trace.insts]


@pytest.mark.parametrize("wl", CASES, ids=lambda w: w.key)
def test_epilogue_trace_is_a_point_of_the_default_space(wl):
    trace = expert_trace(wl)
    assert trace.as_json() == epilogue_trace(wl).as_json()    # expert_trace dispatches here
    space = DesignSpace(wl, "llvm")
    assert space.sketch_of(trace) is not None
    assert set(trace.decisions) == set(trace.sampling_indices())   # every choice made
    sch = space.apply(Trace.from_json(json.dumps(trace.as_json())))
    assert sch is not None, space.last_error
    assert sch.script() == expert_schedule(wl).script()
    check_on_interp(sch, wl)


@pytest.mark.parametrize("wl", CASES, ids=lambda w: w.key)
@pytest.mark.parametrize("target", [AVX512, AVX2], ids=["avx512", "avx2"])
def test_the_epilogue_runs_on_the_register_tile(wl, target):
    """The activation is the consumer fused at tile level 2 (no write cache: bias_add is
    inlined into it), and lowering shrinks the intermediate buffer to that tile."""
    trace = epilogue_trace(wl, target)
    kinds = _kinds(trace)
    assert _write_cache_level(trace) == 2 and "cache_write" not in kinds
    assert "compute_inline" in kinds
    sch = DesignSpace(wl, target).apply(trace)
    block = "conv" if EPILOGUE_OPS[wl.name] == "conv2d" else "gemm"
    act = [sch.get(lp) for lp in sch.get_loops(sch.get_block(ACTIVATION[wl.name]))]
    main = [sch.get(lp) for lp in sch.get_loops(sch.get_block(block))]
    shared = next(n for n, (a, m) in enumerate(zip(act, main + [None])) if a != m)
    assert shared >= 1, (act, main)    # under the main nest's tile loops, not at the root,
    assert main[shared].startswith(("k_", "rc_"))   # beside the tile's reduction
    allocs = [line.strip() for line in lower(sch).script().splitlines()
              if line.strip().startswith(f"{block} = alloc(")]
    assert len(allocs) == 1, lower(sch).script()
    shape = json.loads(allocs[0].split("alloc(")[1].split("]")[0] + "]")
    spatial = [trace.decisions[i] for i in trace.sampling_indices()
               if trace.insts[i].kind == "sample_perfect_tile" and len(trace.decisions[i]) == 4]
    assert math.prod(shape) == math.prod(d[2] * d[3] for d in spatial)   # the register tile


def test_the_gemm_nest_takes_the_gemm_experts_tiles():
    """Same shape, same tile decisions as ``gemm``'s expert (its plan is imported, not
    copied): on both vector widths."""
    for target in (AVX512, AVX2):
        for wl in (ops.gemm_bias_gelu(128, 3072, 768), ops.gemm_bias_gelu(64, 192, 96)):
            plan = _tile_plan(main_nest(wl), target)
            fused = epilogue_trace(wl, target)
            tiles = [fused.decisions[i] for i in fused.sampling_indices()
                     if fused.insts[i].kind == "sample_perfect_tile"]
            assert tiles == [plan["i"], plan["j"], plan["k"]], (target, wl.key)
            rows, vectors = plan["i"][3], -(-plan["j"][3] // target.vector_lanes)
            # a gemm's tile: up to 3/4 of the registers (expert._contraction); gemm + bias +
            # GELU 128x3072x768 on one Xeon core, 8 x 48 against 4 x 64: 1.16x
            assert rows * vectors <= target.vector_registers * 3 // 4


def test_the_conv_nest_takes_the_conv_experts_plan_for_its_sketch():
    """The channel-vectorized plan where the fused space offers that sketch, else the
    column-vectorized one; either way the conv expert's own plan function's tiles."""
    from explorer.space.expert import _Budget, _conv_channel
    wl = ops.conv2d_bias_relu(1, 64, 56, 56, 64, 3, 3, padding=1)
    trace = epilogue_trace(wl, AVX512)
    channel = "transform_layout" in _kinds(trace)
    offered = any("transform_layout" in _kinds(s.trace)
                  for s in DesignSpace(wl, AVX512).sketches)
    assert channel == offered
    plan = (_conv_channel(dict(wl.params), _Budget.of(AVX512)) if channel
            else _tile_plan(main_nest(wl), AVX512))
    tiles = [trace.decisions[i] for i in trace.sampling_indices()
             if trace.insts[i].kind == "sample_perfect_tile"]
    assert tiles == [plan[v] for v in ("n", "k", "p", "q", "rc", "ry", "rx")]


@pytest.mark.parametrize("wl", [ops.conv2d_bias_relu(1, 16, 14, 14, 32, 3, 3, padding=1),
                                ops.conv2d_bias_relu(1, 8, 13, 13, 16, 3, 3, stride=2),
                                ops.gemm_bias_gelu(64, 192, 96), ops.gemm_bias_gelu(13, 37, 29)],
                         ids=lambda w: w.key)
def test_expert_epilogues_are_correct_on_llvm(wl):
    args = wl.make_args(seed=3)
    build(expert_schedule(wl), "llvm")(*args)
    wl.check(args)


def test_the_tuners_first_trial_is_the_expert(tmp_path):
    wl = ops.gemm_bias_gelu(32, 64, 48)
    res = Tuner(wl, "llvm", trials=2, batch_size=2, database=str(tmp_path / "db"), seed=0,
                cost_model="random", pretrained=False).run()
    assert res.trials == 2
    first = min(Database(str(tmp_path / "db")).records(wl), key=lambda r: r.trial)
    assert first.error is None
    space = DesignSpace(wl, "llvm")
    assert space.apply(Trace.from_json(first.trace)).script() == expert_schedule(wl).script()


def test_bad_requests_say_what_to_do():
    with pytest.raises(SpaceError, match="they exist for conv2d_bias_relu, gemm_bias_gelu"):
        epilogue_trace(ops.gemm(8, 8, 8))
    with pytest.raises(SpaceError, match="llvm"):
        epilogue_trace(ops.gemm_bias_gelu(8, 8, 8), "cuda")
    with pytest.raises(SpaceError, match="llvm"):
        expert_trace(ops.conv2d_bias_relu(1, 4, 8, 8, 8, 3, 3), "cuda")
