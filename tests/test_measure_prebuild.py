"""Builds ahead (``measure.prebuild``): candidates the search hints are built on idle
workers while it runs, ``measure`` takes those builds instead of building again, nothing
builds while a kernel is timed, and the hints change nothing of what the search
proposes. Every kernel run here is checked against numpy."""
import time

import pytest

from explorer import Schedule, ops
from explorer.database import Database
from explorer.measure import Measurer, RunConfig
from explorer.measure.prebuild import spare_workers
from explorer.tune import Tuner

from test_measure import tiled_gemm

CFG = RunConfig(repeats=2, number=1, min_repeat_secs=0.001, run_timeout=5.0,
                build_timeout=30.0)


def test_spare_workers_are_the_cores_the_search_leaves():
    assert spare_workers(2, cores=2) == 1
    assert spare_workers(2, cores=1) == 0
    assert spare_workers(2, cores=16) == 2
    assert spare_workers(1, cores=8) == 1


@pytest.fixture()
def measurer():
    with Measurer("llvm", CFG, workers=2) as m:
        m.prebuilder.spare = 1      # one worker builds ahead, whatever this host's cores
        yield m


def _until_built(m, n, limit=60.0):
    end = time.monotonic() + limit
    while m.prebuilder.built < n and time.monotonic() < end:
        m.prebuilder.poll()
        time.sleep(0.01)


def test_measure_takes_the_builds_made_ahead_and_builds_only_the_rest(measurer):
    wl = ops.gemm(16, 16, 8)
    ahead = [measurer.input(tiled_gemm(wl)), measurer.input(tiled_gemm(wl, 2, 4))]
    measurer.prebuild(ahead)
    _until_built(measurer, 2)
    assert measurer.prebuilder.built == 2 and not measurer.prebuilder.busy
    built = []
    build = measurer.builder.build
    measurer.builder.build = lambda inps, *a, **k: built.extend(inps) or build(inps, *a, **k)
    try:
        other = measurer.input(Schedule(wl))
        results = measurer.measure(ahead + [other])
    finally:
        measurer.builder.build = build
    assert built == [other]                         # the two built ahead are not rebuilt
    assert measurer.prebuilder.used == 2 and not measurer.prebuilder.done
    for r in results:
        assert r.ok and r.max_abs_error is not None and r.max_abs_error < 1e-4, r
        assert r.build_secs is not None and r.build_secs > 0


def test_measure_waits_for_the_builds_in_flight_and_drops_the_queue(measurer):
    wl = ops.gemm(32, 32, 16)
    wanted = [measurer.input(tiled_gemm(wl, a, b)) for a, b in ((4, 8), (2, 8), (8, 4))]
    measurer.pool[0].wait_ready()                    # a worker not started yet takes none
    measurer.prebuild(wanted)                        # one starts at once, two wait
    assert len(measurer.prebuilder.busy) == 1 and len(measurer.prebuilder.queue) == 2
    results = measurer.measure(wanted[:1])
    assert not measurer.prebuilder.busy and not measurer.prebuilder.queue
    assert results[0].ok and results[0].max_abs_error < 1e-4
    assert measurer.prebuilder.used == 1


def test_a_measurer_with_no_spare_worker_builds_nothing_ahead():
    with Measurer("llvm", CFG, workers=1) as m:
        m.prebuilder.spare = 0
        wl = ops.gemm(16, 16, 8)
        m.prebuild([m.input(tiled_gemm(wl))])
        assert not m.prebuilder.busy and not m.prebuilder.queue
        r = m.measure([m.input(tiled_gemm(wl))])[0]
        assert r.ok and r.max_abs_error < 1e-4 and m.prebuilder.used == 0


def _proposed(tmp_path, name, ahead: bool):
    wl = ops.get("gemm", 64, 64, 64)
    tuner = Tuner(wl, "llvm", trials=8, batch_size=8, database=tmp_path / name, seed=3,
                  config=CFG, seed_expert=False, retime_top=0)
    if not ahead:
        begin = tuner.begin

        def no_ahead(*a, **k):
            begin(*a, **k)
            tuner.context.ahead = None
        tuner.begin = no_ahead
    res = tuner.run()
    recs = Database(tmp_path / name).records(wl, res.target)
    return res, tuner, [r.trace for r in recs], recs


def test_the_hints_change_nothing_the_search_proposes(tmp_path):
    res, tuner, traces, recs = _proposed(tmp_path, "ahead", True)
    if tuner.measurer.prebuilder.spare:         # a host with a core to spare
        assert tuner.measurer.prebuilder.built > 0
    assert res.built_ahead == tuner.measurer.prebuilder.used <= 8
    _, _, traces_off, _ = _proposed(tmp_path, "off", False)
    assert traces == traces_off and len(traces) == 8
    assert res.failed == 0 and all(r.ok for r in recs)   # each checked against numpy
