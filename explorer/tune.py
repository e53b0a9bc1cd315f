"""The tuner: rounds of sample -> predict -> measure -> update, for one workload.

    result = Tuner(ops.get("gemm", 1024, 1024, 1024), "llvm", trials=64, seed=0,
                   database="tuning_db").run()

The workload is a library op, a user's ``Workload`` (``Workload.from_te``), or a
PrimFunc or Schedule (tuned as a workload checked against its unscheduled
program).

On a ``cuda`` target the workers compile each candidate with nvcc, reject those
over the device's limits (ptxas's registers and shared memory) before they run,
and time the rest on the GPU through pycuda (the tuner refuses up front, saying
what is missing, where there is no pycuda or driver). ``emulate=True`` runs the
same path on a machine without a GPU: sample, generate the CUDA C, compile it with
nvcc when present (without it the tuner says so once and only emulates), run it
on the host emulator and check it against numpy. Emulation measures no speed:
its records are marked ``emulated`` and kept apart from GPU measurements (see
``explorer.database``); the search is told only which candidates ran correctly
(every correct one costs the same), and the best is the first correct one. ``runner="dask://HOST:PORT"`` measures on Dask workers
(``explorer.measure.dask_runner``) instead of worker processes on this machine.

Every stage emits an event on ``tuner.events`` (see ``explorer.events``):
widgets, logs and progress bars subscribe; the engine knows none of them.
Every measured candidate, failed ones included, is appended to the database
with its trace, so a run resumes where it stopped (the trial budget counts
what the database already holds) and the best schedule replays exactly. Resuming
needs each record's postprocessed function (the search must not propose it again)
and its features (the cost model learns them): the database's feature cache keeps
both per record, under a version of the code that made them
(``explorer.feature_cache``), so a resume reads them instead of replaying every
trace; what the cache lacks, or holds from other code, is replayed and added. ResNet-18's 12 tasks on a loaded 2-core VM:
resuming 3000 records took 68 s, 8 s from the cache (most of it rebuilding the
functions from their JSON); 288 tuned records 22 s, 4.6 s.

When the rounds are done, the ``retime_top`` fastest correct candidates, and
the expert seed's record wherever it ranks, are timed again in
``retime_rounds`` interleaved rounds (each round times each of them once, its
result checked against numpy again), and the best is the one whose re-timing runs
are fastest by their lower quartile (``TuningRecord.rank_seconds``: runs taken
seconds apart compare; bursts only slow runs down; one lucky round of five cannot
win). The best of hundreds of noisy
measurements is otherwise, more often than not, a lucky one: on a shared 2-core
VM (where this was measured) whole seconds ran 1.2-1.3x slow, and a candidate timed in a quiet second
beats a faster one timed in a slow second. The expert joins the re-timing
because one slow first timing would otherwise drop a steady kernel for good: on
gemm 997x661x211 the expert read 1.50 ms once (1.02 ms steady) and the tuner
kept a kernel whose times flipped between 1.24 and 2.53 ms.
"""
from __future__ import annotations

import gc
import math
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace

from .target import as_target
from .database import Database, TuningRecord, ranked, trace_key
from .errors import ExplorerError
from .feature_cache import replayed
from .measure.load import warn_if_busy
from .features import FEATURE_VERSION, training_rows
from .events import (CandidateMeasured, EventBus, ModelUpdated, NewBest, Retimed, Retiming,
                     RoundStarted, TuningFinished, TuningStarted, WarmStart)
from .schedule import Trace


@dataclass
class TuneResult:
    workload: dict
    target: str
    trials: int
    measured: int
    failed: int                                   # did not build, crashed, wrong result...
    best_seconds: float | None
    best_gflops: float | None
    tuning_seconds: float
    trace: dict | None
    strategy: str = ""
    seed: int = 0
    cutoff: int = 0            # correct but far slower than the best: cut short, not failed
    estimated: int = 0         # stopped early: two warm looks, no repeats (_estimate_meta)
    history: list = field(default_factory=list)   # best GFLOP/s after each trial
    rounds: list = field(default_factory=list)    # per-round model metrics
    retimed: list = field(default_factory=list)   # the top candidates timed again at the end
    emulated: bool = False     # run on the host emulator: no seconds, no GFLOP/s
    pretrained: str | None = None   # the pre-trained cost model it started from
    phase_seconds: dict = field(default_factory=dict)   # wall seconds by phase (PhaseClock)
    built_ahead: int = 0       # candidates built while the search ran (Measurer.prebuild)

    def as_json(self) -> dict:
        return asdict(self)


class PhaseClock:
    """Wall seconds of a run by phase: ``setup`` (resume, warm start, workers), ``search``
    (the strategy: sampling, mutation, replay, postprocessing, features and predictions
    of the population), ``measure`` (building and timing on the workers), ``train`` (the
    cost model's updates), ``retime``; ``other`` is what is left (records, events; under
    a task scheduler, the other tasks' turns too). While the search runs, the workers
    it leaves idle build the candidates it hints (``TuneContext.hint``,
    ``Measurer.prebuild``): ``measure`` builds only the others (``built_ahead``)."""

    def __init__(self):
        self.seconds: dict = {}

    @contextmanager
    def __call__(self, phase: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start


@dataclass
class TunerState:
    """Where a tuning run stands: counts, the correct records, the best, and whether
    it can go on. The tuner changes it; a task scheduler only reads it."""
    trial: int = 0            # candidates recorded so far, the database's included
    measured: int = 0         # measured by this run
    failed: int = 0           # did not build, crashed, wrong result...
    cutoff: int = 0           # correct but far slower than the best: cut short
    estimated: int = 0        # correct, far slower than the best, stopped early
    ok: list = field(default_factory=list)        # correct records
    best: TuningRecord | None = None
    retimed: list = field(default_factory=list)   # (trial, seconds before, after)
    stale: int = 0            # rounds since the best last improved
    round: int = 0
    exhausted: bool = False   # the strategy had nothing new to propose
    built_ahead: int = 0      # measured candidates built while the search ran


def _cost_model(kind, seed: int):
    if kind is None or not isinstance(kind, str):
        return kind
    from .cost_model import RandomModel, XGBCostModel
    if kind == "xgb":
        return XGBCostModel(seed=seed)
    if kind == "random":
        return RandomModel(seed=seed)
    raise ExplorerError(f"unknown cost model {kind!r}; use 'xgb' or 'random'")


class Tuner:
    """Tunes one workload on one target; see the module docstring."""

    def __init__(self, workload, target="llvm", trials: int = 64, strategy="evolutionary",
                 cost_model="xgb", database=None, seed: int = 0, batch_size: int = 32,
                 config=None, space=None, early_stopping: int | None = None,
                 seed_expert: bool = True, measurer=None, retime_top: int = 4,
                 retime_rounds: int = 5, runner=None, emulate: bool = False,
                 pretrained=True):
        if not isinstance(trials, int) or trials < 1:
            raise ExplorerError(f"trials must be a positive int, got {trials!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ExplorerError(f"batch_size must be a positive int, got {batch_size!r}")
        for name, v in (("retime_top", retime_top), ("retime_rounds", retime_rounds)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ExplorerError(f"{name} must be an int >= 0 (0: no re-timing), got {v!r}")
        self.retime_top, self.retime_rounds = retime_top, retime_rounds
        from .workload import as_workload
        self.workload = workload = as_workload(workload, "Tuner")
        self.target = as_target(target)
        from .measure.runner_choice import parse_runner
        self.runner = runner
        self.emulate = bool(emulate)
        if self.emulate:
            _check_emulation(self.target, parse_runner(runner))
        elif parse_runner(runner) is None:    # a remote runner's workers build, not this host
            from .backends import check_buildable
            check_buildable(self.target)
        self.trials = trials
        self.seed = seed
        self.batch_size = batch_size
        self.early_stopping = early_stopping
        self.events = EventBus()
        self.database = (database if isinstance(database, Database) or database is None
                         else Database(database))
        if space is None:
            from .space import DesignSpace
            space = DesignSpace(workload, self.target)
        self.space = space
        from .search import TuneContext, make_strategy
        self.strategy = make_strategy(strategy) if isinstance(strategy, str) else strategy
        self.cost_model = _cost_model(cost_model, seed)
        self.context = TuneContext(workload, self.target, space, self.cost_model,
                                   self.database, seed)
        # the expert's traces, kept to re-time its records at the end whatever their
        # first timing read (the strategy pops its copy as it measures them)
        self.seed_traces: list = []
        if seed_expert and hasattr(self.strategy, "seeds"):
            self.seed_traces = self._expert_seeds()
            self.strategy.seeds = list(self.seed_traces)
        self.config = config
        self._measurer = measurer
        self.pretrained = _check_pretrained(pretrained)
        self.warm_start = None
        self.resumed: tuple = ([], [])   # (features, costs) read back, not yet taught
        self.clock = PhaseClock()        # begin() starts a fresh one

    def _expert_seeds(self) -> list:
        from .space.expert import expert_trace
        try:
            return [expert_trace(self.workload, self.target)]
        except ExplorerError:   # no expert schedule for this operator or target
            return []

    # ------------------------------------------------------------ resume
    def _resume(self) -> list:
        """Records already in the database for this workload and target; the model
        and the strategy learn from them before the first round. Each record's
        function (for the strategy's set of measured programs) and features (for the
        model) come from the database's feature cache where it holds them
        (``feature_cache.replayed``), else from replaying its trace."""
        if self.database is None:
            return []
        self.database.commit_workload(self.workload)
        done = self.database.records(self.workload, str(self.target), emulated=self.emulate)
        self.resumed = ([], [])
        feats, costs = [], []
        for rec, got in zip(done, replayed(self.database, self.space, self.context, done,
                                           self.cost_model is not None)):
            if got is None:
                continue
            key, raw, rows = got
            self.context.measured.add(key)
            if rows is not None:
                if raw is not None:     # none for rows with ptxas's resources in
                    self.context.remember_features(key, raw)
                feats.append(rows)
                costs.append(rec.seconds)
        if feats:
            self.resumed = (feats, costs)
        return done

    def learn_resumed(self, feats=None, costs=None, groups=None) -> None:
        """Teach the cost model the records read back by ``begin`` (by default this
        tuner's own, ``self.resumed``), then warm-start it if it is still untrained. A
        task scheduler gives all its tasks' records to a shared model in one call."""
        if feats is None:
            feats, costs = self.resumed
            groups = self.workload.key
        with self.clock("setup"):
            if feats and self.cost_model is not None:
                self.cost_model.update(feats, costs, groups=groups)
            self.resumed = ([], [])
            self._warm_start()

    # ------------------------------------------------------------ the loop
    def run(self) -> TuneResult:
        """Tune until the trial budget is spent, the space is exhausted or early stopping."""
        self.begin()
        try:
            while self.step():
                pass
            self.retime()
        finally:
            self.close()
        return self.finish()

    def begin(self, learn: bool = True) -> None:
        """Emit TuningStarted, resume from the database, start the measurer. ``learn``
        False leaves the records read back untaught (``learn_resumed`` teaches them)."""
        self._start = time.perf_counter()
        self.clock = PhaseClock()
        wl, tgt = self.workload, str(self.target)
        self.events.emit(TuningStarted(wl.key, tgt, self.trials, self.strategy.name, self.seed))
        if self._measurer is None:    # a task scheduler's tuners share one: it checks once
            warn_if_busy(self.target, self.runner)
        done = self._resume()
        if learn:
            self.learn_resumed()
        ok = [r for r in done if r.ok]
        cut = sum(r.error_kind == "cutoff" for r in done)
        self.state = TunerState(trial=len(done), failed=len(done) - len(ok) - cut, cutoff=cut,
                                ok=list(ok), best=(ranked(ok, self.emulate) or [None])[0])
        self.history: list = []
        self.rounds: list = []
        self.strategy.pre_tuning(self.context)
        # what setup built lives for the whole run: the cycle collector's full passes
        # (a few a round) skip it from now on (gc.unfreeze in finish)
        gc.freeze()
        self._own_measurer = self._measurer is None
        self.measurer = self._measurer or self._make_measurer()
        self.context.ahead = _BuildAhead.of(self.measurer, self.target, self.emulate)
        self._remember_resumed_best()
        self.clock.seconds["setup"] = time.perf_counter() - self._start

    def _remember_resumed_best(self) -> None:
        """Give the measurer the best time the resumed records hold (timed in full or
        re-timed, not an early stop's estimate), so that this run's cutoff and early
        stop compare with it as the first run's did."""
        best_secs = getattr(self.measurer, "best_secs", None)
        timed = [r for r in self.state.ok if r.retime_secs or not r.meta.get("estimate")]
        if self.emulate or not timed or not isinstance(best_secs, dict):
            return
        from .measure import MeasureInput
        from .measure.runner import workload_target_key
        best = min(timed, key=lambda r: r.seconds)
        seed = getattr(getattr(self.measurer, "config", None), "seed", 0)
        key = workload_target_key(MeasureInput.from_workload(self.workload, best.trace,
                                                             self.target, check_seed=seed))
        best_secs[key] = min(best_secs.get(key, math.inf), best.seconds)

    def _warm_start(self) -> None:
        """An XGBoost model not trained yet (no records of this workload, or too few)
        starts from the pre-trained model of the target's family; a WarmStart event
        says which, or why none (``explorer.cost_model.pretrained``)."""
        from .cost_model import XGBCostModel
        model = self.cost_model
        if self.pretrained is False or not isinstance(model, XGBCostModel) or model.trained:
            return
        from .cost_model.pretrained import warm_start
        note = warm_start(model, self.target, self.pretrained)
        self.warm_start = note
        if note.refused:
            warnings.warn(note.message)
        self.events.emit(WarmStart(self.workload.key, note.family, note.source, note.message))

    @property
    def active(self) -> bool:
        st = self.state
        return (st.trial < self.trials and not st.exhausted
                and not (self.early_stopping and st.stale >= self.early_stopping))

    def step(self, limit: int | None = None) -> int:
        """One round of at most ``batch_size`` (and ``limit``) candidates; returns how
        many were recorded (0 when there is nothing left to do)."""
        if not self.active:
            return 0
        st = self.state
        n = min(self.batch_size, self.trials - st.trial, limit or self.batch_size)
        self.events.emit(RoundStarted(self.workload.key, st.round, n))
        with self.clock("search"):
            cands = self.strategy.generate_candidates(n)
        if not cands:
            st.exhausted = True
            return 0
        before = st.trial
        self.rounds.append(self._round(st.round, cands, self.measurer, st, self.history))
        st.round += 1
        if st.trial == before:
            st.exhausted = True
        return st.trial - before

    def close(self) -> None:
        if getattr(self, "_own_measurer", False):
            self.measurer.close()
            self._own_measurer = False

    def finish(self) -> TuneResult:
        wl, st = self.workload, self.state
        self.strategy.post_tuning()
        b = st.best
        timed = b is not None and not self.emulate
        total = time.perf_counter() - self._start
        phases = {k: round(v, 3) for k, v in self.clock.seconds.items()}
        phases["other"] = round(total - sum(self.clock.seconds.values()), 3)
        gc.unfreeze()
        result = TuneResult(
            workload={"op": wl.name, "params": dict(wl.params), "dtype": wl.dtype,
                      "key": wl.key},
            target=str(self.target), trials=st.trial, measured=st.measured,
            failed=st.failed, best_seconds=b.seconds if timed else None,
            best_gflops=wl.flops / b.seconds / 1e9 if timed else None, emulated=self.emulate,
            tuning_seconds=total, trace=b.trace if b else None, phase_seconds=phases,
            strategy=self.strategy.name, seed=self.seed, history=self.history,
            rounds=self.rounds, cutoff=st.cutoff, estimated=st.estimated,
            built_ahead=st.built_ahead,
            pretrained=(getattr(self.cost_model, "warm_started", None) or {}).get("path"),
            retimed=[{"trial": t, "seconds_before": a, "seconds_after": c}
                     for t, a, c in st.retimed])
        self.events.emit(TuningFinished(wl.key, result.trials, result.measured, result.failed,
                                        result.best_seconds, result.best_gflops,
                                        result.tuning_seconds))
        return result

    def retime(self) -> list:
        """Time the ``retime_top`` fastest correct candidates (and the expert seed's
        record, wherever it ranks) again, ``retime_rounds`` rounds of one timing each,
        interleaved (each run checked against numpy again), add the run times to their
        records (and the database) and pick the best anew. Returns [(trial, seconds
        before, seconds after), ...]."""
        with self.clock("retime"):
            return self._retime()

    def _retime(self) -> list:
        """``retime``'s work."""
        st = self.state
        if not self.retime_top or not self.retime_rounds or self.emulate:
            return []
        top = sorted(st.ok, key=lambda r: r.seconds)[:self.retime_top]
        ids = {id(r) for r in top}
        top += [r for r in self._seed_records() if id(r) not in ids]
        if len(top) < 2:
            return []
        wl = self.workload
        self.events.emit(Retiming(wl.key, len(top), self.retime_rounds))
        scheds = [self.space.apply(Trace.from_json(r.trace)) for r in top]
        top = [r for r, s in zip(top, scheds) if s is not None]
        inputs = [self.measurer.input(s) for s in scheds if s is not None]
        runs: list = [[] for _ in top]
        errors: list = [None for _ in top]
        for i, results in enumerate(self.measurer.remeasure(inputs, self.retime_rounds)):
            for res in results:
                if res.ok:
                    runs[i].extend(res.run_secs)
                elif errors[i] is None and res.error_kind in WRONG_ON_RETIME:
                    errors[i] = f"re-timing: {res.error_kind}: {res.error}"
        with self._batch():
            afters = [self._commit_retime(rec, secs, err)
                      for rec, secs, err in zip(top, runs, errors)]
        self.events.emit(Retimed(
            wl.key, tuple(r.trial for r in afters),
            tuple(r.seconds if r.ok else None for r in afters),
            tuple(wl.flops / r.seconds / 1e9 if r.ok else None for r in afters),
            tuple(r.retime_error for r in afters)))
        new = {id(r): a for r, a in zip(top, afters)}
        st.ok = [a for a in (new.get(id(r), r) for r in st.ok) if a.ok]
        st.best = (ranked(st.ok) or [None])[0]
        b = st.best
        if b is not None:   # the same candidate or not, its seconds are new
            self.events.emit(NewBest(wl.key, b.trial, b.seconds, wl.flops / b.seconds / 1e9,
                                     b.trace))
        st.retimed = [(r.trial, r.seconds, a.seconds) for r, a in zip(top, afters)]
        return st.retimed

    def _seed_records(self) -> list:
        """The correct records of the expert seed's schedules (none when not seeded)."""
        keys = set()
        for trace in self.seed_traces:
            sch = self.space.apply(trace)
            if sch is not None:
                keys.add(trace_key(sch.trace.as_json()))
        return [r for r in self.state.ok if r.trace_key in keys]

    def _commit_retime(self, rec: TuningRecord, secs: list, error):
        """``rec`` with its re-run times (or the re-run's error) added, in the database
        when it holds the record; ``rec`` itself when no re-run succeeded or failed."""
        if error is None and not secs:
            return rec
        secs = None if error is not None else secs   # a failed re-run outweighs the others
        if self.database is not None and self.database.record(rec.workload, rec.target,
                                                              rec.trace) is not None:
            return self.database.commit_retime(rec, secs, error=error)
        if error is not None:
            return replace(rec, retime_error=error)
        return replace(rec, retime_secs=rec.retime_secs + tuple(secs))

    def _make_measurer(self):
        if self.emulate:
            from .measure import Measurer
            return Measurer(self.target, self.config, emulate=True)
        from .measure.runner_choice import open_measurer
        return open_measurer(self.runner, self.target, self.config)

    def _round(self, rnd: int, cands: list, measurer, state: TunerState,
               history: list) -> dict:
        wl, tgt = self.workload, str(self.target)
        with self.clock("search"):
            feats = self.context.features(cands) if self.cost_model is not None else None
            preds = (list(self.cost_model.predict(feats)) if self.cost_model is not None
                     else [None] * len(cands))
        pre = getattr(measurer, "prebuilder", None)
        used = pre.used if pre is not None else 0
        with self.clock("measure"):
            results = measurer.measure([measurer.input(s) for s in cands])
        state.built_ahead += (pre.used if pre is not None else 0) - used
        costs = []
        improved = False
        with self._batch():     # the round's records: one write and one fsync
            for sch, res, pred in zip(cands, results, preds):
                improved |= self._record(rnd, sch, res, pred, state, history, costs)
        state.stale = 0 if improved else state.stale + 1
        metrics = _model_metrics(preds, costs)
        if self.cost_model is not None:
            with self.clock("train"):
                feats = training_rows(cands, feats, self.target,
                                      [r.resources for r in results])
                self.cost_model.update(feats, costs, groups=wl.key)
        with self.clock("search"):
            self.strategy.notify_results(cands, costs)
        self.events.emit(ModelUpdated(wl.key, rnd, len(self.database.records(wl, tgt))
                                      if self.database is not None else state.trial,
                                      metrics["rank_accuracy"], metrics["top_k_recall"],
                                      _importance(self.cost_model)))
        return {"round": rnd, **metrics}

    def _record(self, rnd: int, sch, res, pred, state: TunerState, history: list,
                costs: list) -> bool:
        """Record one measured candidate (the database, the state, events); True when
        it is the new best."""
        wl, tgt = self.workload, str(self.target)
        improved = False
        trace = sch.trace.as_json()
        secs = res.median_secs if res.ok and not res.emulated else None
        rec = TuningRecord(
            workload=wl.key, target=tgt, trace=trace,
            run_secs=tuple(res.run_secs) if res.ok else None,
            error=None if res.ok else f"{res.error_kind}: {res.error}",
            error_kind=None if res.ok else res.error_kind,
            feature_version=FEATURE_VERSION, strategy=self.strategy.name, round=rnd,
            trial=state.trial, seed=self.seed,
            predicted=None if pred is None else float(pred), build_secs=res.build_secs,
            emulated=self.emulate, resources=res.resources, meta=_estimate_meta(res))
        if self.database is not None:
            self.database.commit_record(rec)
        if rec.ok:
            state.ok.append(rec)
        gflops = wl.flops / secs / 1e9 if secs else None
        self.events.emit(CandidateMeasured(wl.key, rnd, state.trial, trace, secs, gflops,
                                           rec.error, rec.predicted, rec.error_kind))
        state.trial += 1
        state.measured += 1
        cut = rec.error_kind == "cutoff"
        state.cutoff += cut
        state.estimated += bool(getattr(res, "estimate", False))
        state.failed += not res.ok and not cut
        costs.append(secs if secs else EMULATED_COST if res.ok else math.inf)
        if res.ok and (state.best is None
                       or ranked([state.best, rec], self.emulate)[0] is rec):
            state.best = rec
            improved = True
            if secs:
                self.events.emit(NewBest(wl.key, rec.trial, secs, gflops, trace))
        b = state.best
        history.append(wl.flops / b.seconds / 1e9 if b and not b.emulated else 0.0)
        return improved

    @contextmanager
    def _batch(self):
        """The database's ``batch`` (nothing without a database)."""
        if self.database is None:
            yield
        else:
            with self.database.batch():
                yield


class _BuildAhead:
    """The search's hints (``TuneContext.hint``) as inputs for the measurer's idle
    workers (``Measurer.prebuild``): the builds of what the search will likely propose
    overlap the search instead of following it."""

    def __init__(self, measurer):
        self.measurer = measurer

    @classmethod
    def of(cls, measurer, target, emulate: bool):
        """One for a local measurer of an llvm target with a worker to spare, else None."""
        pre = getattr(measurer, "prebuilder", None)
        if emulate or target.kind != "llvm" or pre is None or not pre.spare:
            return None
        return cls(measurer)

    def want(self, schedules: list) -> None:
        self.measurer.prebuild([self.measurer.input(s) for s in schedules])

    def poll(self) -> None:
        self.measurer.prebuilder.poll()


def _estimate_meta(res) -> dict:
    """A record's ``meta`` for a result stopped early (``MeasureResult.estimate``): its
    one ``run_secs`` is the faster of two warm looks, both over ``early_stop_factor``
    x the best so far, an estimate rather than a median of repeats. The cost model
    learns it as it is (a slow candidate's time within a look's noise); a resumed
    run reads the mark and does not take it for a full timing."""
    if not getattr(res, "estimate", False):
        return {}
    return {"estimate": "early_stop: the faster of two warm looks, no repeats"}


# The cost of every correct emulated candidate: emulation tells the search which
# candidates run correctly, not which are fast.
EMULATED_COST = 1.0


def _check_pretrained(pretrained):
    """True, False or the folder of a pre-trained model (or of one per family)."""
    if isinstance(pretrained, bool):
        return pretrained
    import os
    if isinstance(pretrained, (str, os.PathLike)) and os.path.isdir(pretrained):
        return os.fspath(pretrained)
    raise ExplorerError(f"pretrained must be True (the shipped model of the target's family), "
                        f"False (start cold) or an existing folder of one, got {pretrained!r}")


def _check_emulation(target, remote) -> None:
    """Raise unless ``target`` can be tuned on the host emulator here; warn once when
    nvcc is missing (candidates are then emulated without compile checks)."""
    if target.kind != "cuda":
        raise ExplorerError(f"emulate=True runs the generated CUDA C on the host emulator; "
                            f"target {target} is not a cuda target (use 'cuda' or "
                            "'cuda -arch=sm_80')")
    if remote is not None:
        raise ExplorerError("emulate=True runs on this machine's worker processes; leave "
                            "runner as 'local'")
    from .backends.cuda.emulate import find_compiler
    find_compiler()
    from .measure.cuda_jobs import compiler_note
    note = compiler_note()
    if note:
        warnings.warn(note)


# A re-timing that finds the result wrong or the kernel failing makes the candidate
# incorrect; a timeout on a busy machine does not.
WRONG_ON_RETIME = ("wrong", "crash", "run")


def _model_metrics(preds: list, costs: list) -> dict:
    pairs = [(p, c) for p, c in zip(preds, costs) if p is not None and math.isfinite(c)]
    if len(pairs) < 2:
        return {"rank_accuracy": None, "top_k_recall": None}
    from .cost_model.metrics import pairwise_rank_accuracy, top_k_recall
    p = [x for x, _ in pairs]
    c = [y for _, y in pairs]
    k = max(1, min(8, len(pairs) // 4))
    acc, rec = float(pairwise_rank_accuracy(p, c)), float(top_k_recall(p, c, k))
    return {"rank_accuracy": None if math.isnan(acc) else acc,
            "top_k_recall": None if math.isnan(rec) else rec}


def _importance(model) -> tuple:
    fn = getattr(model, "feature_importance", None)
    if fn is None:
        return ()
    try:
        return tuple(fn())[:20]
    except ExplorerError:
        return ()


def tune(workload, target="llvm", trials: int = 64, **kw) -> TuneResult:
    """Tune ``workload`` (a Workload, PrimFunc or Schedule) and return the result (see
    ``Tuner`` for the options)."""
    return Tuner(workload, target, trials, **kw).run()
