"""Whether other processes are using the cores that measurements run on.

A kernel timed on every core of a 2-core machine while another process holds a
core is descheduled for a scheduler slice at each parallel region: a 0.05 ms
kernel measures 6 ms, a median of such runs says nothing, and a tuner then
prefers kernels on fewer threads (they lose less). The load average cannot tell
this apart from explorer's own recent work, so ``busy_cores`` watches the
machine's CPU counters (``/proc/stat``) for a short window while this process
sleeps: what was busy then was someone else (explorer's idle workers sleep).

``busy_note(threads)`` turns that into the sentence the tables keep, or None
when the cores the measurement needs are free; ``warn_if_busy`` is the check a
tuning run makes before it measures (a Tuner with its own measurer, a task
scheduler once for all its tasks), as a warning that notebooks and the CLI show. Where the
counters cannot be read (not Linux) both say nothing rather than guess.
``EXPLORER_BUSY_CHECK=0`` in the environment turns the check off (a machine the
user knows to be shared, or a test suite that wants quiet output).
"""
from __future__ import annotations

import os
import time
import warnings

STAT = "/proc/stat"
SWITCH = "EXPLORER_BUSY_CHECK"   # "0": busy_note says nothing
WINDOW_SECS = 0.25
SLACK_CORES = 0.5     # others may use this much of the cores a measurement needs


def cpu_times(path: str = STAT) -> tuple | None:
    """(busy, total) jiffies summed over all CPUs, or None if ``path`` cannot be read
    as ``/proc/stat`` (idle and iowait count as idle)."""
    try:
        with open(path) as f:
            first = f.readline().split()
        if not first or first[0] != "cpu":
            return None
        ticks = [int(x) for x in first[1:]]
    except (OSError, ValueError):
        return None
    if len(ticks) < 4:
        return None
    # user nice system idle iowait irq softirq steal (guest time is inside user)
    total = sum(ticks[:8])
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return total - idle, total


def available_cores() -> int:
    """The cores this process may run on (its affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def busy_cores(window: float = WINDOW_SECS, path: str = STAT, sleep=time.sleep) -> float | None:
    """How many cores other processes kept busy over ``window`` seconds while this one
    slept (0.0 on an idle machine), or None where the counters cannot be read."""
    if not window > 0:
        raise ValueError(f"busy_cores: window must be > 0 seconds, not {window!r}")
    before = cpu_times(path)
    if before is None:
        return None
    sleep(window)
    after = cpu_times(path)
    if after is None:
        return None
    busy, total = after[0] - before[0], after[1] - before[1]
    if total <= 0:
        return None
    return (os.cpu_count() or 1) * busy / total


def busy_note(threads: int, window: float = WINDOW_SECS, path: str = STAT,
              sleep=time.sleep) -> str | None:
    """A warning when other processes use the cores that a measurement on ``threads``
    threads needs (more than ``SLACK_CORES`` of them), else None (and without looking
    when ``EXPLORER_BUSY_CHECK=0``)."""
    if os.environ.get(SWITCH, "1").strip() == "0":
        return None
    busy = busy_cores(window, path, sleep)
    if busy is None:
        return None
    cores = available_cores()
    free = cores - busy
    if free >= min(threads, cores) - SLACK_CORES:
        return None
    return (f"the machine is busy: other processes kept {busy:.1f} of its {cores} cores "
            f"busy, and kernels here run on {threads} thread{'s' * (threads != 1)}; their "
            "timings will be slow and noisy (a descheduled thread stalls every parallel "
            "region) and tuning will favour fewer threads. Measure on an idle machine.")


def warn_if_busy(target, runner=None) -> str | None:
    """Warn (``warnings.warn``) and return ``busy_note``'s sentence when ``target``'s
    kernels are measured on this machine (a CPU target, no remote runner) and other
    processes hold the cores they run on; None otherwise."""
    from .runner_choice import parse_runner
    if getattr(target, "kind", None) != "llvm" or parse_runner(runner) is not None:
        return None
    note = busy_note(getattr(target, "num_cores", None) or available_cores())
    if note:
        warnings.warn(note, stacklevel=3)
    return note
