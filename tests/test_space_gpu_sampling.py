"""Sampling the GPU design space within the target's limits (issue 15, item 8): a draw of
``DesignSpace(wl, "cuda")`` fills in the tilings' decisions with ``GPUTilingLimits.sample``
(the sampling instructions' own distribution, redrawn until the model of the limits
accepts), so that most draws pass ``VerifyGPUCode``, while the traces keep the same
instructions, replay and mutate as before, and CPU draws do not change at all.

CI shapes and counts; the default shapes are ``benchmarks/sample_validity.py``."""
import importlib.util
import pathlib
import random
import sys

import pytest

from explorer import Target
from explorer.backends import build
from explorer.space import DesignSpace
from explorer.space.mutators.gpu_limits import GPUTilingLimits, sample_within_limits
from explorer.space.replay import structure
from test_space_gpu import _no_cxx      # the reason to skip where no C++ compiler runs

_BENCH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "sample_validity.py"
_spec = importlib.util.spec_from_file_location("sample_validity", _BENCH)
sv = sys.modules.setdefault("sample_validity", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(sv)

GPU = Target("cuda")
OPS = ("gemm", "conv2d", "batch_matmul", "dense_bias_relu")
WORKLOADS = sv.mv.workloads("ci", OPS)
DRAWS, SEED = 24, 0


@pytest.fixture(scope="module")
def spaces() -> dict:
    return {name: DesignSpace(wl, GPU) for name, wl in WORKLOADS.items()}


@pytest.fixture(scope="module")
def draws(spaces) -> dict:
    """{operator: (draws now, draws as before)}, ``DRAWS`` each from ``SEED``."""
    return {name: (sp.sample_candidates(DRAWS, seed=SEED), sv.draws_before(sp, DRAWS, SEED))
            for name, sp in spaces.items()}


def _valid(got) -> list:
    return [s for s, _ in got if s is not None]


@pytest.mark.parametrize("name", OPS)
def test_most_draws_are_valid_and_more_than_before(draws, name):
    now, before = draws[name]
    reasons = [r for s, r in now if s is None]
    assert len(_valid(now)) >= 0.5 * DRAWS, reasons[:3]
    assert len(_valid(now)) > len(_valid(before))


@pytest.mark.parametrize("name", OPS)
def test_draws_keep_the_sketch_instructions_and_vary(spaces, draws, name):
    """Same instructions as the sketch (the sampling ones included), decisions of their
    own: more than one thread count per block among the draws."""
    sp = spaces[name]
    sketches = [structure(t) for t in sp._sketch_traces]
    threads = set()
    for sch in _valid(draws[name][0]):
        design = sp.design_trace(sch.trace)
        assert structure(design) in sketches
        limits = GPUTilingLimits(design, sp.func, GPU)
        assert limits.violation(design.decisions) is None
        b = limits.blocks[0]
        threads.add(tuple(p.factor(design.decisions) for ps in b.order for p in ps
                          if p.tag == "threadIdx.x"))
    assert len(threads) >= 3


@pytest.mark.parametrize("name", ["gemm", "conv2d"])
def test_the_same_seed_gives_the_same_traces(spaces, draws, name):
    again = DesignSpace(WORKLOADS[name], GPU).sample_candidates(DRAWS, seed=SEED)
    first = draws[name][0]
    assert [s.trace.as_json() if s else r for s, r in again] == \
           [s.trace.as_json() if s else r for s, r in first]
    other = spaces[name].sample_candidates(4, seed=SEED + 1)
    assert [s.trace.as_json() for s in _valid(other)] != \
           [s.trace.as_json() for s in _valid(first)[:len(_valid(other))]]


@pytest.mark.parametrize("name", ["gemm", "conv2d"])
def test_sampled_traces_replay_and_mutate(spaces, draws, name):
    sp = spaces[name]
    rng = random.Random(1)
    children = 0
    for sch in _valid(draws[name][0])[:6]:
        again = sp.apply(sch.trace)
        assert again is not None, sp.last_error
        assert again.trace.as_json() == sch.trace.as_json()
        child = sp.mutate(sch.trace, rng)
        children += child is not None and sp.apply(child) is not None
    assert children >= 5


def test_cpu_draws_are_unchanged(monkeypatch):
    """On the CPU a draw is the sketch replayed with nothing filled in, as before, but for
    the register-tile conditioning (``explorer.space.register_tiles``): with its share at 0
    the draws are the old ones."""
    from explorer.space import register_tiles
    monkeypatch.setattr(register_tiles, "FIT_SHARE", 0.0)
    sp = DesignSpace(WORKLOADS["gemm"], "llvm")
    now = sp.sample_candidates(6, seed=SEED)
    before = sv.draws_before(sp, 6, SEED)
    assert [s.trace.as_json() if s else r for s, r in now] == \
           [s.trace.as_json() if s else r for s, r in before]


def test_limits_no_draw_can_meet_leave_the_decisions_to_the_instructions():
    """Fewer threads allowed than the warp the tiling asks for: no decisions are filled
    in, and the draws fail as they did, saying why."""
    tight = GPU.with_(max_threads_per_block=16)
    sp = DesignSpace(WORKLOADS["gemm"], tight)
    sketch = sp._sketch_list()[0]
    assert sample_within_limits(sketch, sp.func, tight, seed=5) == {}
    got = sp.sample_candidates(3, seed=SEED)
    assert all(s is None and "threads per block" in r for s, r in got)


def test_sampled_decisions_are_the_instructions_own():
    """Every decision filled in is one its instruction could draw (replay checks it),
    and a different seed draws others."""
    sp = DesignSpace(WORKLOADS["gemm"], GPU)
    sketch = sp._sketch_list()[0]
    a = sample_within_limits(sketch, sp.func, GPU, seed=1)
    assert a and a == sample_within_limits(sketch, sp.func, GPU, seed=1)
    assert a != sample_within_limits(sketch, sp.func, GPU, seed=2)
    insts = sketch.trace.insts
    assert {insts[i].kind for i in a} <= {"sample_perfect_tile", "sample_categorical"}
    assert "sample_perfect_tile" in {insts[i].kind for i in a}


def _check_on_interp(sch, wl) -> None:
    args = wl.make_args(0)
    build(sch, "interp")(*args)         # threads one by one, races reported
    assert wl.check(args) >= 0


@pytest.mark.parametrize("name", OPS)
def test_sampled_schedules_match_numpy_on_the_interpreter(draws, name):
    for sch in _valid(draws[name][0])[:2]:
        _check_on_interp(sch, WORKLOADS[name])


@pytest.mark.skipif(_no_cxx() is not None, reason=_no_cxx() or "")
@pytest.mark.parametrize("name", OPS)
def test_sampled_schedules_match_numpy_in_the_cuda_emulator(draws, name):
    wl = WORKLOADS[name]
    for sch in _valid(draws[name][0])[:2]:
        args = wl.make_args(1)
        build(sch, "cuda", emulate=True)(*args)
        assert wl.check(args) >= 0
