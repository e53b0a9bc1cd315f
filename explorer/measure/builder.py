"""The builder: replays traces and compiles candidates in the pool's workers, in parallel.

Each worker builds one input at a time and keeps the kernel (an artifact) for
the runner; all workers build at once, so a batch of candidates compiles on all
cores. A build that raises, crashes its worker or overruns ``timeout`` becomes a
failed ``BuildResult``; a crashed or overrun worker is replaced.
"""
from __future__ import annotations

import time

from .pool import WorkerDied, WorkerPool, wait_any
from .result import BuildResult, MeasureInput


class LocalBuilder:
    """Builds ``MeasureInput``s on the workers of ``pool`` with a per-build ``timeout``."""

    def __init__(self, pool: WorkerPool, timeout: float = 30.0):
        self.pool = pool
        self.timeout = timeout

    def build(self, inputs: list, fresh: bool = False) -> list:
        """One ``BuildResult`` per input, in order. ``fresh`` bypasses the backend's
        compile cache (to time real compiles)."""
        inputs = list(inputs)
        results: list = [None] * len(inputs)
        pending = list(range(len(inputs)))
        busy: dict = {}  # worker index -> (input index, job id, deadline, worker generation)
        while pending or busy:
            for w in self.pool.workers:
                if pending and w.index not in busy:
                    i = pending.pop(0)
                    job = self._send(w, inputs[i], fresh)
                    if isinstance(job, BuildResult):
                        results[i] = job
                    else:
                        busy[w.index] = (i, job, time.monotonic() + self.timeout, w.generation)
            if busy:
                deadline = min(b[2] for b in busy.values())
                wait_any([self.pool[k] for k in busy], deadline - time.monotonic())
                for k in list(busy):
                    done = self._collect(self.pool[k], inputs, busy[k])
                    if done is not None:
                        results[busy.pop(k)[0]] = done
        return results

    def _send(self, w, inp: MeasureInput, fresh: bool):
        """The job id, or a failed BuildResult when the worker cannot take it (a worker
        found dead is restarted and tried once more)."""
        for attempt in range(2):
            try:
                return w.send("build", {"input": inp.as_json(), "fresh": fresh})
            except WorkerDied as e:
                w.restart()
                error = e
        return BuildResult(inp, error=f"could not hand the build to a worker: {error}",
                           error_kind="internal")

    def _collect(self, w, inputs: list, job: tuple) -> BuildResult | None:
        i, jid, deadline, generation = job
        inp = inputs[i]
        try:
            msg = w.poll()
        except WorkerDied as e:
            w.restart()
            return BuildResult(inp, error=f"the build crashed: {e}", error_kind="build_crash")
        if msg is not None and msg.get("id") == jid and msg.get("event") == "done":
            return self._result(w, inp, msg, generation)
        if time.monotonic() >= deadline:
            w.restart()
            return BuildResult(inp, error=f"the build did not finish within {self.timeout:g} s "
                               "(build_timeout); its worker was restarted",
                               error_kind="build_timeout")
        return None

    @staticmethod
    def _result(w, inp: MeasureInput, msg: dict, generation: int) -> BuildResult:
        if "error" in msg:
            return BuildResult(inp, error=msg["error"], error_kind=msg["error_kind"])
        r = msg["result"]
        if "error" in r:
            return BuildResult(inp, error=r["error"], error_kind=r["error_kind"])
        return BuildResult(inp, worker=w.index, generation=generation, artifact=r["artifact"],
                           build_secs=r["build_secs"], compile_secs=r["compile_secs"])
