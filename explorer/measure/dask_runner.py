"""Measurement on Dask distributed workers, behind the local ``Measurer``'s interface.

    with DaskMeasurer("tcp://10.0.0.5:8786", "llvm") as m:
        results = m.measure([m.input(sch) for sch in candidates])

or ``Tuner(..., runner="dask://10.0.0.5:8786")``, ``explorer tune --runner
dask://10.0.0.5:8786``. Each candidate is one Dask task, ``dask_jobs.measure_job``,
sent by import path with JSON data (workload, trace, target, timing settings)
and, for a workload outside the operator library, its expected outputs as
bytes; it asks for the resources ``measure=1`` and the target's tag, so it runs
alone on a worker of its target, which builds, checks and times it in a local
worker pool as ``Measurer`` does. The client keeps as many jobs in flight as
there are workers for the target, so a job starts when it is sent and its
deadline (``job_timeout``) means what it says; results come back in order, as
``MeasureResult`` values, to the same tuner, events and database as local ones.

Faults are results or retries, never a hang:
- a worker lost mid-job: Dask runs the job again on another worker (a job
  that kills workers again and again comes back failed, ``crash``);
- a worker that does not answer within ``job_timeout`` of the job's start
  (stopped, cut off): the job is cancelled there, that worker gets no more
  jobs from this measurer, and the job goes to another worker, up to
  ``retries`` times, then comes back failed (``timeout``, naming the workers);
- a scheduler restart (or a lost connection): Dask cancels every job; the
  client reconnects and sends the unfinished ones again when workers are back;
- no worker of the target for ``worker_wait`` seconds: the jobs not done come
  back failed (``internal``, with the reason), and the next ``measure`` raises.
Each input gets exactly one result, so the tuner records each candidate once.
A target no connected worker serves is a ``MeasureError`` naming the targets the
workers do serve.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import math
import threading
import time
import uuid
from dataclasses import dataclass, field, replace

from ..errors import MeasureError
from ..target import as_target
from .config import RunConfig
from .dask_jobs import MEASURE, TOPIC, job_payload, job_resources, measure_job, target_tag
from .pool import Closing
from .result import MeasureInput, MeasureResult
from .runner import workload_target_key

INSTALL = "pip install -e '.[dask]' (or pip install 'distributed>=2024.1')"


def import_distributed():
    """The ``distributed`` module, or a MeasureError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise MeasureError(f"measuring on Dask workers needs Dask distributed, which is not "
                           f"installed here: {INSTALL}") from None
    return distributed


@dataclass(eq=False)
class _Job:
    """One input on its way through the cluster: its attempts so far and the live one."""
    index: int
    input: MeasureInput
    cutoff: float | None
    expected: bytes | None
    prefer: str | None = None       # a worker to try first (re-timing on the same one)
    attempts: list = field(default_factory=list)   # why earlier attempts were given up
    future: object = None
    key: str = ""
    sent: float = 0.0
    first_sent: float = 0.0
    worker: str | None = None


class DaskMeasurer(Closing):
    """Measures ``MeasureInput``s of ``target`` on the Dask workers of ``scheduler``
    (an address such as ``tcp://HOST:PORT``); see the module docstring."""

    def __init__(self, scheduler: str, target="llvm", config: RunConfig | None = None, *,
                 job_timeout: float | None = None, worker_wait: float = 30.0,
                 retries: int = 2, connect_timeout: float = 10.0):
        _check_settings(job_timeout, worker_wait, retries, connect_timeout)
        distributed = import_distributed()
        self.target = as_target(target)
        self.config = config or RunConfig()
        self.tag = target_tag(self.target)
        cfg = self.config
        self.job_timeout = job_timeout or 2 * cfg.build_timeout + cfg.run_timeout + 60.0
        self.worker_wait, self.retries = worker_wait, retries
        self.address = scheduler
        self.best_secs: dict = {}
        self.started: dict = {}       # job key -> (monotonic time, worker address)
        self.start_log: list = []     # (job key, worker address) of every start, in order
        self.suspects: set = set()    # workers that let a job overrun job_timeout
        self._lock = threading.Lock()
        self._expected: dict = {}
        try:
            self.client = distributed.Client(scheduler, timeout=connect_timeout,
                                             set_as_default=False)
        except (OSError, TimeoutError, ValueError) as e:
            raise MeasureError(f"cannot reach the Dask scheduler at {scheduler} within "
                               f"{connect_timeout:g} s ({type(e).__name__}: {e}): start one "
                               "with `dask scheduler` and workers with `explorer worker "
                               "--scheduler HOST:PORT`") from None
        self._subscribe()
        try:
            self.require_workers()
        except MeasureError:
            self.close()
            raise

    # ------------------------------------------------------------ workers
    def _subscribe(self) -> None:
        try:
            self.client.subscribe_topic(TOPIC, self._on_event)
        except (OSError, TimeoutError, RuntimeError):
            pass      # not connected now: start times then count from sending

    def _on_event(self, event) -> None:
        _, msg = event
        with self._lock:
            self.started[msg["job"]] = (time.monotonic(), msg["worker"])
            self.start_log.append((msg["job"], msg["worker"]))

    def workers(self) -> list:
        """Addresses of the connected workers that measure for this target, suspects
        left out."""
        if self.client.status != "running":
            return []
        try:
            info = self.client.scheduler_info(n_workers=-1)
        except (OSError, TimeoutError):
            return []
        return sorted(a for a, w in info.get("workers", {}).items()
                      if {MEASURE, self.tag} <= set(w.get("resources") or {})
                      and a not in self.suspects)

    def served_tags(self) -> list:
        """The targets (tags) the connected workers measure for."""
        info = self.client.scheduler_info(n_workers=-1) if self.client.status == "running" \
            else {}
        return sorted({t for w in info.get("workers", {}).values()
                       for t in (w.get("resources") or {}) if t != MEASURE})

    def require_workers(self, wait: float | None = None) -> list:
        """The workers of this target, waiting up to ``wait`` (default ``worker_wait``)
        seconds while no worker at all is connected, and 1 s while only workers of other
        targets are (the scheduler's view catches up); MeasureError when none serves it."""
        if self.client is None:
            raise MeasureError("this DaskMeasurer is closed: make a new one")
        deadline = time.monotonic() + (self.worker_wait if wait is None else wait)
        while True:
            found = self.workers()
            if found:
                return found
            tags = self.served_tags() if self.client.status == "running" else []
            if tags:
                deadline = min(deadline, time.monotonic() + 1.0)
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        raise MeasureError(
            f"no Dask worker at {self.address} measures for target {self.target} (resource "
            f"{self.tag}); {self._why_none(tags)}: start one on a machine of that target with "
            f"`explorer worker --scheduler {self.address}` (it detects its target), or tune "
            "for a target the workers serve")

    def _why_none(self, tags: list) -> str:
        if self.tag in tags and self.suspects:
            return (f"its workers of that target stopped answering (no result within "
                    f"job_timeout {self.job_timeout:g} s)")
        if self.tag in tags:
            return f"its workers of that target have no {MEASURE}=1 resource"
        return (f"its workers serve {', '.join(tags)}" if tags else
                "no measuring worker is connected to it")

    # ------------------------------------------------------------ the measurer interface
    def input(self, sch, fault: str | None = None) -> MeasureInput:
        """As ``Measurer.input``: the input of schedule ``sch`` for this target."""
        return MeasureInput.from_schedule(sch, self.target, fault=fault,
                                          check_seed=self.config.seed)

    def cutoff_for(self, inp: MeasureInput) -> float | None:
        """The cutoff a job for ``inp`` gets now (None: none), as ``LocalRunner``'s."""
        cfg, best = self.config, self.best_secs.get(workload_target_key(inp))
        if cfg.cutoff_factor is None or best is None:
            return None
        return max(cfg.cutoff_factor * best, cfg.min_cutoff_secs)

    def measure(self, inputs: list, cutoff_secs: float | None = None) -> list:
        """One ``MeasureResult`` per input, in order, measured on the workers (as many at
        once as there are workers); failures are values."""
        inputs = list(inputs)
        if not inputs:
            return []
        self.require_workers()
        jobs = [_Job(i, inp, cutoff_secs, self._expected_bytes(inp))
                for i, inp in enumerate(inputs)]
        return [res for res, _ in self._run(jobs, auto_cutoff=cutoff_secs is None)]

    def remeasure(self, inputs: list, rounds: int) -> list:
        """As ``Measurer.remeasure``: ``rounds`` interleaved rounds, no cutoff, each input
        on the worker that measured it first when that worker is still there."""
        inputs = list(inputs)
        out: list = [[] for _ in inputs]
        where: list = [None] * len(inputs)
        for _ in range(rounds):
            if not inputs:
                break
            self.require_workers()
            jobs = [_Job(i, inp, math.inf, self._expected_bytes(inp), prefer=where[i])
                    for i, inp in enumerate(inputs)]
            for i, (res, worker) in enumerate(self._run(jobs, auto_cutoff=False)):
                out[i].append(res)
                where[i] = where[i] or worker
        return out

    def measure_schedules(self, schedules: list, cutoff_secs: float | None = None) -> list:
        return self.measure([self.input(s) for s in schedules], cutoff_secs)

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is None:
            return
        self.client = None
        try:
            client.unsubscribe_topic(TOPIC)
        except Exception:   # a lost connection: there is nothing left to unsubscribe
            pass
        client.close()

    # ------------------------------------------------------------ jobs
    def _expected_bytes(self, inp: MeasureInput) -> bytes | None:
        if inp.expected is None:
            return None
        data = self._expected.get(inp.expected)
        if data is None:
            with open(inp.expected, "rb") as f:
                data = self._expected[inp.expected] = f.read()
        return data

    def _submit(self, job: _Job, workers: list, auto_cutoff: bool) -> None:
        if auto_cutoff:
            job.cutoff = self.cutoff_for(job.input)
        job.key = f"explorer-measure-{uuid.uuid4().hex}"
        place: dict = {}
        if job.prefer in workers:
            place = {"workers": [job.prefer], "allow_other_workers": True}
        elif self.suspects:
            place = {"workers": workers}
        job.future = self.client.submit(
            measure_job, job_payload(job.key, job.input, self.config, job.cutoff),
            job.expected, key=job.key, resources=job_resources(self.target), pure=False,
            **place)
        job.sent = time.monotonic()
        job.first_sent = job.first_sent or job.sent
        job.worker = None

    def _run(self, jobs: list, auto_cutoff: bool) -> list:
        """(result, worker address) per job, in order."""
        results: list = [None] * len(jobs)
        waiting, running = list(jobs), []
        alone_since = None        # since when no worker of the target is connected
        while waiting or running:
            workers = self.workers()
            while waiting and workers and len(running) < len(workers):
                job = waiting.pop(0)
                try:
                    self._submit(job, workers, auto_cutoff)
                    running.append(job)
                except Exception as e:   # the connection dropped since workers() answered
                    self._retry(job, ("lost", f"the job could not be sent ({e!r})"), waiting,
                                results)
                    break
            self._wait([j.future for j in running])
            for job in list(running):
                out = self._collect(job)
                if out is None:
                    continue
                running.remove(job)
                if isinstance(out, MeasureResult):
                    results[job.index] = (self._finish(job, out), job.worker)
                else:
                    self._retry(job, out, waiting, results)
            alone_since = None if workers else (alone_since or time.monotonic())
            if alone_since is not None and time.monotonic() - alone_since > self.worker_wait:
                self._give_up(waiting + running, results)
                waiting, running = [], []
        return results

    def _wait(self, futures: list) -> None:
        if not futures:
            time.sleep(0.2)
            return
        try:
            with self.client.as_current():
                import_distributed().wait(futures, timeout=0.2, return_when="FIRST_COMPLETED")
        except (TimeoutError, asyncio.TimeoutError, asyncio.CancelledError,
                concurrent.futures.CancelledError):
            pass              # _collect looks at each future

    def _collect(self, job: _Job):
        """The job's MeasureResult when it ended, a reason to try again, or None (running)."""
        fut = job.future
        with self._lock:
            start, job.worker = self.started.get(job.key, (job.sent, None))
        if fut.done():
            with self._lock:
                self.started.pop(job.key, None)
        if fut.status == "finished":
            data = json.loads(fut.result())
            job.worker = data.get("worker", job.worker)
            res = MeasureResult.from_json({**data, "input": None})
            return replace(res, input=job.input)
        if fut.status == "error":
            return _error_result(job, fut.exception())
        if fut.status in ("cancelled", "lost"):
            return ("lost", "the Dask scheduler dropped the job (restarted, or the "
                    "connection to it was lost)")
        if time.monotonic() - start > self.job_timeout:
            fut.cancel()
            if job.worker is not None:
                self.suspects.add(job.worker)
            where = f"Dask worker {job.worker}" if job.worker else "no worker started it"
            return ("timeout", f"no answer within job_timeout {self.job_timeout:g} s "
                    f"({where})")
        return None

    def _retry(self, job: _Job, why: tuple, waiting: list, results: list) -> None:
        kind, reason = why
        job.attempts.append(reason)
        if kind == "lost":        # a restarted scheduler holds no subscription
            self._subscribe()
        job.prefer = None
        if len(job.attempts) <= self.retries:
            waiting.insert(0, job)
            return
        tries = "; ".join(f"attempt {n + 1}: {r}" for n, r in enumerate(job.attempts))
        results[job.index] = (self._finish(job, MeasureResult.failed(
            job.input, kind, f"gave up after {len(job.attempts)} attempts on Dask workers "
            f"({tries})")), None)

    def _give_up(self, jobs: list, results: list) -> None:
        for job in jobs:
            if job.future is not None and not job.future.done():
                job.future.cancel()
            results[job.index] = (self._finish(job, MeasureResult.failed(
                job.input, "internal", f"no Dask worker for target {self.target} ({self.tag}) "
                f"was connected to {self.address} for {self.worker_wait:g} s (worker_wait); "
                "the candidate was not measured")), None)

    def _finish(self, job: _Job, res: MeasureResult) -> MeasureResult:
        res = replace(res, wall_secs=time.monotonic() - (job.first_sent or time.monotonic()))
        if res.ok:
            key = workload_target_key(job.input)
            self.best_secs[key] = min(self.best_secs.get(key, math.inf), res.median_secs)
        return res


def _check_settings(job_timeout, worker_wait, retries, connect_timeout) -> None:
    for name, v in (("job_timeout", job_timeout), ("worker_wait", worker_wait),
                    ("connect_timeout", connect_timeout)):
        if v is not None and not (isinstance(v, (int, float)) and v > 0):
            raise MeasureError(f"DaskMeasurer {name}={v!r} must be a positive number of seconds")
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise MeasureError(f"DaskMeasurer retries={retries!r} must be an int >= 0 (0: a job "
                           "given up once is failed)")


def _error_result(job: _Job, exc: BaseException):
    """What a job that raised on the cluster gives: a failed result, or a reason to retry."""
    name = type(exc).__name__
    if name == "KilledWorker":
        return MeasureResult.failed(job.input, "crash", f"the job took down Dask workers again "
                                    f"and again and was given up by the scheduler ({exc})")
    if name in ("CancelledError", "FutureCancelledError"):
        return ("lost", f"the job was cancelled on the cluster ({exc})")
    return MeasureResult.failed(job.input, "internal", f"the Dask worker {job.worker or ''} "
                                f"raised {name}: {exc} (is the same explorer installed there?)")
