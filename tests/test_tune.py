"""The tuner end to end on the CPU: events, database, reproducibility, resume after
SIGKILL, and a wrong kernel that must never become the best."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from explorer import ExplorerError, Schedule, Trace, build, ops
from explorer.database import Database
from explorer.events import (CandidateMeasured, ModelUpdated, NewBest, RoundStarted,
                             TuningFinished, TuningStarted)
from explorer.measure import Measurer
from explorer.search import EvolutionarySearch, SimulatedAnnealing
from explorer.space import DesignSpace, ScheduleRule
from explorer.tune import Tuner
from tuning_helpers import measured_traces

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _check_records(db, wl, target):
    """Every correct record replays exactly and equals numpy on the interpreter."""
    recs = db.records(wl, target)
    for r in recs:
        if not r.ok:
            continue
        sch = Trace.from_json(r.trace).apply_to(Schedule(wl))
        args = wl.make_args(5)
        build(sch, "interp")(*args)
        wl.check(args)
    return recs


def test_tune_events_database_and_checked_records(tmp_path):
    wl = ops.get("gemm", 32, 32, 32)
    t = Tuner(wl, "llvm", trials=12, batch_size=6, database=tmp_path / "db", seed=0)
    events = []
    t.events.subscribe(events.append)
    res = t.run()
    kinds = [type(e) for e in events]
    assert kinds[0] is TuningStarted and kinds[-1] is TuningFinished
    assert kinds.count(RoundStarted) == 2 and kinds.count(ModelUpdated) == 2
    assert kinds.count(CandidateMeasured) == 12 and NewBest in kinds
    assert res.trials == 12 and res.measured == 12 and res.best_gflops > 0
    assert len(res.history) == 12 and res.history == sorted(res.history)
    # where the time went: every phase ran, and the phases add up to the run
    phases = res.phase_seconds
    assert {"setup", "search", "measure", "train", "retime", "other"} <= phases.keys()
    assert all(v >= 0 for k, v in phases.items() if k != "other")
    assert sum(phases.values()) == pytest.approx(res.tuning_seconds, abs=0.01)
    db = Database(tmp_path / "db")
    recs = _check_records(db, wl, str(t.target))
    assert len(recs) == 12
    best = db.best(wl, str(t.target))[0]
    assert best.seconds == pytest.approx(res.best_seconds)
    assert best.trace == res.trace
    # the best replays exactly to what was measured
    again = db.best_schedule(wl, str(t.target))
    assert again.func == Trace.from_json(res.trace).apply_to(Schedule(wl)).func


def _first_round(seed, tmp):
    wl = ops.get("gemm", 32, 32, 32)
    t = Tuner(wl, "llvm", trials=6, batch_size=6, database=tmp, seed=seed,
              strategy=EvolutionarySearch(population=24, generations=1))
    return measured_traces(t)


def test_same_seed_same_first_round(tmp_path):
    a = _first_round(3, tmp_path / "a")
    b = _first_round(3, tmp_path / "b")
    c = _first_round(4, tmp_path / "c")
    assert a == b and len(a) == 6
    assert a != c


def test_resume_after_sigkill_loses_and_duplicates_nothing(tmp_path):
    db = tmp_path / "db"
    cmd = [sys.executable, "-m", "explorer.cli", "tune", "--op", "gemm", "--shape",
           "32,32,32", "--trials", "20", "--batch-size", "4", "--db", str(db), "--no-numpy",
           "--quiet", "--seed", "1", "--strategy", "replay"]
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    recs = db / "records.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if recs.exists() and recs.read_text().count("\n") >= 6:
            break
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)  # the tuner and its measurement workers
    p.wait()
    killed_at = recs.read_text().count("\n")
    assert 6 <= killed_at < 20
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    d = Database(db)
    keys = [r.trace_key for r in d.records()]
    assert len(keys) == 20 and len(set(keys)) == 20
    assert sorted(r.trial for r in d.records()) == list(range(20))
    _check_records(d, ops.get("gemm", 32, 32, 32), d.records()[0].target)


class BreakResult(ScheduleRule):
    """Test only: half the samples carry a marker the measurer turns into a wrong result."""

    def apply(self, sch, block):
        if sch.get(block) != "C":
            return [sch]
        v = sch.sample_categorical([0, 1], [0.5, 0.5])
        sch.annotate(block, "test.break_result", v)
        return [sch]


class MarkingMeasurer(Measurer):
    def input(self, sch, fault=None):
        broken = "annotate('test.break_result', 1)" in sch.script()
        return super().input(sch, fault="wrong" if broken else None)


def test_wrong_kernel_never_becomes_best(tmp_path):
    wl = ops.get("gemm", 32, 32, 32)
    space = DesignSpace(wl, "llvm").add_rule(BreakResult())
    with MarkingMeasurer("llvm") as m:
        t = Tuner(wl, "llvm", trials=16, batch_size=8, database=tmp_path / "db", seed=2,
                  space=space, measurer=m, seed_expert=False,
                  strategy=EvolutionarySearch(population=24, generations=1))
        res = t.run()
    recs = Database(tmp_path / "db").records()
    broken = [r for r in recs if "test.break_result" in json.dumps(r.trace)
              and _marked(r.trace)]
    assert broken, "the test rule never produced a broken candidate"
    assert all(not r.ok and r.error.startswith("wrong") for r in broken)
    assert not _marked(res.trace)


def _marked(trace) -> bool:
    sch = Trace.from_json(trace).apply_to(Schedule(ops.get("gemm", 32, 32, 32)))
    return "annotate('test.break_result', 1)" in sch.script()


@pytest.mark.parametrize("strategy", ["replay", "annealing"])
def test_other_strategies_run(tmp_path, strategy):
    wl = ops.get("gemm", 32, 32, 32)
    if strategy == "annealing":
        strategy = SimulatedAnnealing(chains=6, steps=4)
    res = Tuner(wl, "llvm", trials=8, batch_size=4, strategy=strategy, seed=0,
                database=tmp_path / "db").run()
    assert res.measured == 8 and res.best_gflops > 0
    _check_records(Database(tmp_path / "db"), wl, res.target)


class LuckyMeasurer(Measurer):
    """Test only: the slowest correct candidate of the first batch is reported 1000x
    faster than it ran (as if timed in a lucky quiet second); re-timings are honest."""

    lucky = None

    def measure(self, inputs, cutoff_secs=None):
        from dataclasses import replace
        out = super().measure(inputs, cutoff_secs)
        ok = [i for i, r in enumerate(out) if r.ok]
        if self.lucky is None and len(ok) > 3:
            i = max(ok, key=lambda i: out[i].median_secs)
            self.lucky = out[i].input.trace
            # one lucky sample: with every repeat divided, the median over its runs and
            # the re-timings could land between a lucky and an honest sample (CI, once)
            out[i] = replace(out[i], run_secs=(min(out[i].run_secs) / 1000,))
        return out


def _fastest_retimed(db, wl, res) -> dict:
    """The entry of ``res.retimed`` whose record ranks first: the lowest ``rank_seconds``
    (the lower quartile of its re-timings), not the lowest reported median."""
    by_trial = {r.trial: r for r in db.records(wl, res.target)}
    return min(res.retimed, key=lambda r: by_trial[r["trial"]].rank_seconds)


def test_retiming_unmasks_a_lucky_measurement(tmp_path):
    wl = ops.get("gemm", 64, 64, 64)
    with LuckyMeasurer("llvm") as m:
        t = Tuner(wl, "llvm", trials=8, batch_size=8, database=tmp_path / "db", seed=1,
                  measurer=m, retime_top=3, retime_rounds=2, seed_expert=False)
        events = []
        t.events.subscribe(events.append)
        res = t.run()
    assert m.lucky is not None, "the batch had too few correct candidates"
    db = Database(tmp_path / "db")
    lucky = db.record(wl, res.target, m.lucky)
    # it was the best before re-timing; its re-timings (2 rounds x 3 repeats) are its
    # real runs, and the median over all its runs is its real time again
    assert len(res.retimed) == 3
    first = min(res.retimed, key=lambda r: r["seconds_before"])
    assert first["trial"] == lucky.trial
    assert len(lucky.run_secs) == 1 and len(lucky.retime_secs) == 6
    # reported 1000x too fast, below every real run; the median of its seven runs is then
    # the third of its six real ones: the real runs decide. (Not "10x slower than the
    # lucky figure": the real run it was made from may have been taken while the
    # machine was busy, 400x slower than the kernel's re-timings once.)
    real = sorted(lucky.retime_secs)
    assert lucky.run_secs[0] == pytest.approx(first["seconds_before"])
    assert lucky.run_secs[0] < real[0]
    assert first["seconds_after"] == pytest.approx(real[2])
    # the best is the fastest of the re-timed by its re-timings (rank_seconds; it reports
    # its median over all runs), in the result, the database and the events alike; a
    # record measured once does not pass it
    fastest = _fastest_retimed(db, wl, res)
    assert res.best_seconds == pytest.approx(fastest["seconds_after"])
    best = db.best(wl, res.target)[0]
    assert best.trial == fastest["trial"] and best.trace == res.trace
    assert best.seconds == pytest.approx(res.best_seconds) and len(best.retime_secs) == 6
    kinds = [type(e).__name__ for e in events]
    assert kinds[-4:] == ["Retiming", "Retimed", "NewBest", "TuningFinished"]
    retiming, retimed, new_best, finished = events[-4:]
    assert retiming.candidates == 3 and retiming.rounds == 2
    assert dict(zip(retimed.trials, retimed.seconds))[lucky.trial] == pytest.approx(lucky.seconds)
    assert new_best.trace == res.trace and new_best.seconds == pytest.approx(res.best_seconds)
    assert finished.best_seconds == pytest.approx(res.best_seconds)
    _check_records(db, wl, res.target)


class UnluckyMeasurer(Measurer):
    """Test only: the first candidate measured (the expert seed, forced first) is
    reported 1000x slower than it ran, as if timed in a busy second; re-timings are
    honest."""

    unlucky = None

    def measure(self, inputs, cutoff_secs=None):
        from dataclasses import replace
        out = super().measure(inputs, cutoff_secs)
        if self.unlucky is None and out and out[0].ok:
            self.unlucky = out[0].input.trace
            out[0] = replace(out[0], run_secs=(max(out[0].run_secs) * 1000,))
        return out


def test_retiming_takes_the_expert_whatever_its_first_timing(tmp_path):
    from explorer.space.expert import expert_trace
    wl = ops.get("gemm", 64, 64, 64)
    with UnluckyMeasurer("llvm") as m:
        t = Tuner(wl, "llvm", trials=8, batch_size=8, database=tmp_path / "db", seed=1,
                  measurer=m, retime_top=2, retime_rounds=2)
        res = t.run()
    db = Database(tmp_path / "db")
    expert = db.record(wl, res.target, m.unlucky)
    assert expert is not None and expert.trial == 0
    # the record is the expert's schedule, and its slow first timing made it the slowest
    assert expert.trace == t.space.apply(expert_trace(wl, t.target)).trace.as_json()
    others = [r for r in db.records(wl, res.target) if r.ok and r.trial != 0]
    assert len(others) >= 2 and all(r.run_secs[0] < expert.run_secs[0] for r in others)
    # the 2 fastest and the expert were re-timed; the expert's honest runs outvote its
    # one slow sample (median over 1 + 6 runs)
    assert len(res.retimed) == 3 and 0 in [r["trial"] for r in res.retimed]
    assert len(expert.retime_secs) == 6 and expert.seconds < expert.run_secs[0] / 10
    fastest = _fastest_retimed(db, wl, res)
    assert res.best_seconds == pytest.approx(fastest["seconds_after"])
    assert db.best(wl, res.target)[0].trial == fastest["trial"]
    _check_records(db, wl, res.target)
    # not seeded: nothing joins the fastest
    with UnluckyMeasurer("llvm") as m:
        res = Tuner(wl, "llvm", trials=8, batch_size=8, database=tmp_path / "db2", seed=1,
                    measurer=m, retime_top=2, retime_rounds=2, seed_expert=False).run()
    assert len(res.retimed) == 2


def test_retime_off_and_bad_settings(tmp_path):
    wl = ops.get("gemm", 32, 32, 32)
    res = Tuner(wl, "llvm", trials=4, batch_size=4, database=tmp_path / "db", seed=0,
                retime_top=0).run()
    assert res.retimed == [] and not (tmp_path / "db" / "retimes.jsonl").exists()
    for bad in (-1, 1.5, True, "4"):
        with pytest.raises(ExplorerError, match="retime_top must be an int >= 0"):
            Tuner(wl, "llvm", trials=4, retime_top=bad)
