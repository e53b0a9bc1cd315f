"""Measurement values, checking and timing plans: everything that runs in this process."""
import json
import time

import numpy as np
import pytest

from explorer import Schedule, ops
from explorer.errors import MeasureError, WorkloadError
from explorer.measure import (BuildResult, MeasureInput, MeasureResult, Reference,
                              ReferenceCache, RunConfig)
from explorer.measure.faults import check_fault
from explorer.measure.timing import plan, time_repeats


def tiled_gemm(wl, fi=4, fj=8):
    sch = Schedule(wl, seed=3)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, fi])
    jo, ji = sch.split(j, [None, fj])
    sch.reorder(io, jo, k, ii, ji)
    return sch


# ------------------------------------------------------------------ MeasureInput

def test_input_round_trips_through_json_and_rebuilds_the_schedule():
    wl = ops.gemm(16, 24, 8)
    sch = tiled_gemm(wl)
    inp = MeasureInput.from_schedule(sch, "interp")
    back = MeasureInput.from_json(json.loads(json.dumps(inp.as_json())))
    assert back == inp and hash(back) == hash(inp)
    assert back.workload().key == wl.key
    assert back.schedule().script() == sch.script()
    assert back.seed == 3 and back.target == "interp"


def test_input_keeps_pair_parameters_hashable_and_json_plain():
    wl = ops.conv2d(1, 3, 7, 6, 4, 3, 3, stride=(1, 2), padding=(1, 0))
    inp = MeasureInput.from_workload(wl, Schedule(wl).trace, "interp")
    assert dict(inp.params)["stride"] == (1, 2)
    data = json.loads(json.dumps(inp.as_json()))
    assert data["params"]["stride"] == [1, 2]
    assert MeasureInput.from_json(data).workload().key == wl.key
    assert len({inp, MeasureInput.from_json(data)}) == 1


def test_input_target_string_carries_the_core_count():
    inp = MeasureInput.from_workload(ops.gemm(8, 8, 8), Schedule(ops.gemm(8, 8, 8)).trace,
                                     "llvm -num-cores=1")
    assert "-num-cores=1" in inp.target


def test_input_errors_name_what_is_missing():
    with pytest.raises(WorkloadError, match="from_schedule takes a Workload .*, not int"):
        MeasureInput.from_schedule(42)
    with pytest.raises(MeasureError, match="op, params"):
        MeasureInput.from_json({"op": "gemm"})


def test_a_primfunc_schedule_is_measured_checked_against_its_unscheduled_program():
    func = ops.gemm(8, 8, 8).func
    inp = MeasureInput.from_schedule(Schedule(func))
    wl = inp.workload()
    assert wl.func == func and wl.checked_by == "program" and inp.expected
    assert wl.key == inp.workload_key and wl.key.startswith("user:gemm#")


# ------------------------------------------------------------------ results and config

def test_result_statistics_and_json():
    inp = MeasureInput.from_workload(ops.gemm(8, 8, 8), Schedule(ops.gemm(8, 8, 8)).trace,
                                     "interp")
    r = MeasureResult(inp, (0.004, 0.001, 0.002, 0.003), flops=8e6, max_abs_error=0.0)
    assert r.ok and r.median_secs == pytest.approx(0.0025)
    assert (r.min_secs, r.max_secs) == (0.001, 0.004)
    assert r.iqr_secs == pytest.approx(0.0015)
    assert r.gflops == pytest.approx(8e6 / 0.0025 / 1e9)
    data = json.loads(json.dumps(r.as_json()))
    assert data["median_secs"] == pytest.approx(0.0025)
    assert MeasureResult.from_json(data) == r


def test_failed_result_is_a_value_without_times():
    r = MeasureResult.failed(None, "crash", "boom")
    assert not r.ok and r.run_secs is None and r.median_secs is None and r.gflops is None
    assert r.as_json()["error_kind"] == "crash"
    b = BuildResult(None, error="x", error_kind="build")
    assert not b.ok


def test_run_config_validates_and_round_trips():
    cfg = RunConfig.thorough()
    assert (cfg.number, cfg.min_repeat_secs) == (3, 0.1)
    assert RunConfig.from_json(cfg.as_json()) == cfg
    with pytest.raises(MeasureError, match="repeats"):
        RunConfig(repeats=-1)
    with pytest.raises(MeasureError, match="cutoff_factor"):
        RunConfig(cutoff_factor=0.5)
    with pytest.raises(MeasureError, match="run_timeout"):
        RunConfig(run_timeout=0)


def test_unknown_fault_is_rejected():
    check_fault("slow:0.1")
    with pytest.raises(MeasureError, match="unknown fault"):
        check_fault("explode")


# ------------------------------------------------------------------ checking

@pytest.mark.parametrize("name", ["gemm", "conv2d", "softmax", "row_sum"])
def test_reference_check_passes_the_true_output_and_fails_a_wrong_one(name):
    wl = ops.get(name, **ops.registry[name].small)
    ref = Reference(wl, seed=1)
    args = ref.fresh_args()
    for out, want in zip(ref.outputs_of(args), ref.expected):
        out[...] = want
    assert ref.compare(args) <= 1e-6
    ref.outputs_of(args)[0].reshape(-1)[1] += 0.5
    with pytest.raises(MeasureError, match="is wrong: max abs error 0.5 at index"):
        ref.compare(args)


def test_fresh_outputs_are_poisoned_and_inputs_protected():
    wl = ops.elementwise(3, 4)
    ref = Reference(wl)
    args = ref.fresh_args()
    assert np.isnan(args[-1]).all()
    with pytest.raises(MeasureError, match="never written"):
        ref.compare(args)
    args[0][...] = 7  # a kernel scribbling on its input spoils only its own copy
    assert not (ref.fresh_args()[0] == 7).any()
    iwl = ops.gemm(4, 4, 4, dtype="int32")
    iref = Reference(iwl)
    assert (iref.fresh_args()[-1] < -2 ** 30).all()


def test_int_outputs_must_match_exactly():
    wl = ops.gemm(4, 5, 6, dtype="int32")
    ref = Reference(wl)
    args = ref.fresh_args()
    args[-1][...] = ref.expected[0]
    assert ref.compare(args) == 0.0
    args[-1][0, 0] += 1
    with pytest.raises(MeasureError, match="atol=0"):
        ref.compare(args)


def test_reference_cache_reuses_and_evicts():
    cache = ReferenceCache(size=2)
    a, b, c = (ops.gemm(4, 4, n) for n in (1, 2, 3))
    ra = cache.get(a)
    assert cache.get(a) is ra
    cache.get(b), cache.get(c)
    assert cache.get(a) is not ra


# ------------------------------------------------------------------ timing plan

def test_plan_fills_the_minimum_repeat_time_and_the_budget():
    cfg = RunConfig(repeats=3, number=1, min_repeat_secs=0.1)
    assert plan(0.001, cfg, 10.0) == (3, 100)
    assert plan(0.5, cfg, 10.0) == (3, 1)
    assert plan(0.5, cfg, 1.2) == (2, 1)
    assert plan(5.0, cfg, 1.0) == (0, 0)
    assert plan(0.001, RunConfig(repeats=0), 10.0) == (0, 0)


def test_time_repeats_warms_up_then_returns_one_sample_per_repeat():
    calls = []

    def call():
        calls.append(1)
        time.sleep(0.001)
    # repeats of about ten calls: one 1 ms sleep read 2.5 ms on a busy host in the
    # calibration, and with 2.5 ms repeats that planned one call a repeat (CI, session 18)
    cfg = RunConfig(repeats=4, number=1, min_repeat_secs=0.01, warmup=1)
    samples, number = time_repeats(call, 0.001, cfg, 10.0)
    # the warm-up call is timed: it is calibration's first batch, then the repeats
    assert len(samples) == 4 and number >= 2 and len(calls) == 1 + 4 * number
    assert all(s >= 0.001 for s in samples)
    samples, number = time_repeats(call, 3.0, cfg, 1.0)  # no room: the first run is the sample
    assert samples == [3.0] and number == 1


def test_inputs_of_space_samples_and_expert_schedules_rebuild_the_same_program():
    from explorer.space import DesignSpace
    from explorer.space.expert import expert_schedule
    wl = ops.gemm(32, 48, 16)
    schedules = DesignSpace(wl, "llvm").sample(3, seed=1) + [expert_schedule(wl, "llvm")]
    for sch in schedules:
        inp = MeasureInput.from_json(json.loads(json.dumps(
            MeasureInput.from_schedule(sch, "llvm").as_json())))
        assert inp.schedule().script() == sch.script()
