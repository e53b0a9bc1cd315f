"""Timing a zero-argument call: warm-up, repeats of enough calls, optional cache flush.

The one timing protocol of the project: the measurement workers time candidates
and library baselines with ``time_repeats``, the roofline sizes its loop with
``scale_until``, and code that times a callable in its own process (``explorer
demo``, the benchmarks) uses ``time_call``, so every printed time is taken the
same way.
"""
from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from ..backends.llvm.runtime import bound_team


WARM_SECS = 0.05


def fast_call(kernel, args: list):
    """A zero-argument callable that runs ``kernel`` on ``args``.

    Arguments are checked once here rather than on every timed call: a
    ``Kernel`` validates shapes, dtypes and layout in Python, which would add
    microseconds to the time of small kernels.
    """
    bind = getattr(kernel, "bind", None)
    if bind is not None:
        return bind(*args)
    check = getattr(kernel, "check_args", None)
    run = getattr(kernel, "_run", None)
    if check is None or run is None:
        return lambda: kernel(*args)
    arrays = check(args)
    return lambda: run(arrays)


def timed(call) -> float:
    """Seconds of one ``call()``."""
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def scale_until(run, goal_secs: float, start: int = 1, cap: int = 1 << 20) -> tuple:
    """``(n, seconds)`` of the first ``run(n)`` for n = start, 4 start, 16 start... that
    lasts ``goal_secs`` (or reaches ``cap``): how much work makes a timing long enough
    to trust the clock."""
    n = start
    while True:
        secs = timed(lambda: run(n))
        if secs >= goal_secs or n >= cap:
            return n, secs
        n *= 4


def _calls(call, n: int) -> None:
    for _ in range(n):
        call()


class CacheFlusher:
    """Writes over a buffer larger than the last-level cache (capped at ``cap`` bytes)."""

    def __init__(self, llc_bytes: int, cap: int = 64 * 2 ** 20):
        n = min(max(2 * llc_bytes, 8 * 2 ** 20), cap) // 8
        self.buf = np.zeros(n, dtype=np.float64)
        self.count = 0

    def __call__(self) -> None:
        self.count += 1
        self.buf.fill(self.count)


def plan(first_secs: float, cfg, budget_secs: float) -> tuple:
    """(repeats, number) for a kernel whose call takes about ``first_secs``, fitting
    ``budget_secs`` (fewer repeats, then fewer calls, down to (0, 0): no more runs)."""
    if cfg.repeats == 0:
        return 0, 0
    est = max(first_secs, 1e-7)
    number = max(cfg.number, math.ceil(cfg.min_repeat_secs / est))
    repeats = cfg.repeats
    while repeats > 1 and repeats * number * est > budget_secs:
        repeats -= 1
    while number > 1 and repeats * number * est > budget_secs:
        number = max(1, number // 2)
    if repeats * number * est > budget_secs:
        return 0, 0
    return repeats, number


def calibrate(call, first_secs: float, cfg) -> float:
    """Seconds per call of a kernel faster than ``min_repeat_secs``: after ``warmup - 1``
    untimed calls, batches of 1, 4, 16... calls until one lasts a tenth of a repeat; the
    mean call of that batch (one cold first call is a poor estimate, and the
    fastest call an optimistic one on a busy machine). The first batch is the last
    warm-up call: a kernel of a tenth of a repeat or more is warm after it and
    its time is the estimate (one call fewer than warming up, then timing)."""
    _calls(call, max(cfg.warmup - 1, 0))
    n, spent = scale_until(lambda n: _calls(call, n), 0.1 * cfg.min_repeat_secs)
    return spent / n


def timed_repeat(call, number: int, limit_secs: float) -> float:
    """Mean seconds per call over ``number`` calls, or over the calls made before
    ``limit_secs`` ran out (a busy machine can make calls far slower than planned)."""
    t0 = time.perf_counter()
    deadline = t0 + limit_secs
    for done in range(1, number + 1):
        call()
        if done & 7 == 0 and time.perf_counter() > deadline:
            break
    return (time.perf_counter() - t0) / done


class Timing(NamedTuple):
    """What ``time_candidate`` measured: seconds per call of each repeat, calls per
    repeat, and whether the samples are an ``estimate`` (the early stop: one warm
    batch of calls, no repeats)."""
    samples: list
    number: int
    estimate: bool = False


def time_candidate(call, first_secs: float, cfg, budget_secs: float, flush=None,
                   stop_above: float | None = None) -> Timing:
    """Warm up, then time repeats (see ``time_repeats``). With ``stop_above`` (seconds),
    a kernel whose warm calls are slower stops there: the warm call and one more
    batch of calls are timed, and if the faster of the two is still over
    ``stop_above`` it is the one sample, an ``estimate`` (two looks, so that one
    call slowed by another process does not stop a good kernel; a cold first call
    is no estimate: page faults, thread start). A kernel that took its first call
    as warm-up (over ``WARM_SECS`` and ``10 x min_repeat_secs``) is looked at on
    that first call and one more."""
    start = time.perf_counter()
    est = first_secs
    if cfg.repeats and first_secs < max(WARM_SECS, 10 * cfg.min_repeat_secs):
        est = calibrate(call, first_secs, cfg)
    if cfg.repeats and stop_above is not None and est > stop_above:
        batch = max(1, math.ceil(0.1 * cfg.min_repeat_secs / est))
        est = min(est, timed_repeat(call, batch, math.inf))
        if est > stop_above:
            return Timing([est], batch, True)
    left = budget_secs - (time.perf_counter() - start)
    repeats, number = plan(est, cfg, left)
    if repeats == 0:
        return Timing([first_secs], 1)
    samples = []
    end = time.perf_counter() + left
    per_repeat = min(left / repeats, max(10 * number * est, 0.1))
    for _ in range(repeats):
        if flush is not None:
            flush()
        samples.append(timed_repeat(call, number, per_repeat))
        if time.perf_counter() > end:
            break
    return Timing(samples, number)


def time_repeats(call, first_secs: float, cfg, budget_secs: float, flush=None) -> tuple:
    """Warm up, then time repeats; returns (seconds per call of each repeat, calls per repeat).

    A kernel whose first call took over ``WARM_SECS`` and ``10 x min_repeat_secs``
    is taken as warm after it and not called again before timing (a cold first
    call of a fast kernel may be slow: thread start-up, page faults). Repeats
    stop early when they overrun the budget (at least one is kept). With no room
    in the budget (or ``cfg.repeats == 0``) the first run is the only sample.
    """
    samples, number, _ = time_candidate(call, first_secs, cfg, budget_secs, flush)
    return samples, number


def time_call(call, cfg, budget_secs: float = math.inf, threads: int = 1) -> list:
    """Seconds per call of each timed repeat of ``call`` under ``cfg`` (a ``RunConfig``):
    one first call, then ``time_repeats`` within ``budget_secs``. For a callable timed
    in this process (a demo, a benchmark); the tuner times in worker processes.
    ``threads``: the kernel's parallel team, bound one thread to a core while it is
    timed, as the tuner's workers time it (``bound_team``: an unbound team can queue
    behind its own spinning master and read up to 200x slow)."""
    with bound_team(threads):
        first = timed(call)
        return time_repeats(call, first, cfg, budget_secs)[0]
