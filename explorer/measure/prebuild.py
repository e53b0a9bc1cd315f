"""Builds ahead: candidates the search is likely to propose, built on idle workers while
it searches.

A tuner's round is: the search (one process, one core), then the builds (all workers),
then the timing (one candidate at a time). While the search runs, the workers are idle.
The search tells the ``Prebuilder`` what it would propose if it stopped now (``want``,
best first) and gives it turns between candidates (``poll``); the prebuilder keeps
``spare`` workers (the cores the search leaves free, ``spare_workers``) building the
wanted inputs in order, one job a worker, and keeps each finished build. ``Measurer.measure``
first lets the jobs in flight finish (``drain``: nothing builds while a kernel is timed)
and then takes the prebuilt result of every input it has (``take``) instead of building
it again. A wanted input that the search does not propose in the end cost a core that
was idle anyway.
"""
from __future__ import annotations

import os
import time
from collections import OrderedDict

from .pool import wait_any

# Prebuilt results kept: a round's worth, with room for the ones the search dropped.
MAX_PREBUILT = 128


def spare_workers(pool_size: int, cores: int | None = None) -> int:
    """Workers that can build while the search runs: the cores other than the one the
    search takes, at most the pool's size (0 on a single core)."""
    cores = cores or os.cpu_count() or 1
    return max(0, min(pool_size, cores - 1))


class Prebuilder:
    """Builds ``want``-ed inputs on up to ``spare`` of ``builder``'s workers between the
    search's steps; see the module docstring. ``key`` maps an input to what makes two
    inputs the same kernel (``measurer.build_key``)."""

    def __init__(self, builder, key, spare: int):
        self.builder, self.key, self.spare = builder, key, spare
        self.queue: list = []               # wanted inputs not built nor in flight
        self.busy: dict = {}                # worker index -> (input, job id, deadline, gen)
        self.done: OrderedDict = OrderedDict()   # build key -> ok BuildResult
        self.built = self.used = 0          # builds finished, taken by measure

    def want(self, inputs: list) -> None:
        """The inputs to build next, best first (replaces the previous wish)."""
        if not self.spare:
            return
        flying = {self.key(b[0]) for b in self.busy.values()}
        self.queue = [i for i in inputs if self.key(i) not in self.done
                      and self.key(i) not in flying]
        self.poll()

    def poll(self) -> None:
        """Collect finished builds and start the next wanted ones; never waits."""
        if not self.spare:
            return
        for k in list(self.busy):
            self._collect(k)
        workers = self.builder.pool.workers[:self.spare]
        for w in workers:
            if self.queue and w.index not in self.busy and w.started():
                inp = self.queue.pop(0)
                job = self.builder._send(w, inp, False)
                if not isinstance(job, int):
                    continue
                self.busy[w.index] = (inp, job, time.monotonic() + self.builder.timeout,
                                      w.generation)

    def drain(self) -> None:
        """Wait for the builds in flight and stop building (the queue is dropped)."""
        self.queue = []
        while self.busy:
            deadline = min(b[2] for b in self.busy.values())
            wait_any([self.builder.pool[k] for k in self.busy], deadline - time.monotonic())
            for k in list(self.busy):
                self._collect(k)

    def take(self, inp):
        """The prebuilt result of ``inp`` (a successful build), or None; once."""
        got = self.done.pop(self.key(inp), None)
        self.used += got is not None
        return got

    def _collect(self, k: int) -> None:
        inp, jid, deadline, gen = self.busy[k]
        res = self.builder._collect(self.builder.pool[k], [inp], (0, jid, deadline, gen))
        if res is None:
            return
        del self.busy[k]
        self.built += 1
        if res.ok:
            self.done[self.key(inp)] = res
            while len(self.done) > MAX_PREBUILT:
                self.done.popitem(last=False)
