"""Sampling instructions: the random choices that make a schedule a probabilistic program.

Each takes a ``random.Random`` and returns a decision; a decision given back
replays the same choice. Decisions are plain JSON values.
"""
from __future__ import annotations

import functools
import random

from ..errors import ScheduleError


@functools.lru_cache(maxsize=4096)
def perfect_tilings(extent: int, n: int, max_innermost: int) -> tuple:
    """Every n-tuple of positive ints with product ``extent`` and innermost <= max."""
    def rec(rest: int, k: int) -> list:
        if k == 1:
            return [(rest,)]
        out = []
        for d in range(1, rest + 1):
            if rest % d == 0:
                out += [(d,) + tail for tail in rec(rest // d, k - 1)]
        return out
    return tuple(t for t in rec(extent, n) if t[-1] <= max_innermost)


def sample_perfect_tile(extent: int, n: int, max_innermost_factor: int, rng: random.Random,
                        decision=None) -> list:
    """n factors of ``extent``, innermost at most ``max_innermost_factor``.

    Unlike TVM, which spreads prime factors at random, every valid tiling is
    equally likely here: small spaces are then covered evenly."""
    if not isinstance(n, int) or n < 1:
        raise ScheduleError(f"sample_perfect_tile: n must be a positive int, got {n!r}")
    if not isinstance(max_innermost_factor, int) or max_innermost_factor < 1:
        raise ScheduleError("sample_perfect_tile: max_innermost_factor must be a positive int")
    if decision is not None:
        d = list(decision)
        if (len(d) != n or not all(isinstance(x, int) and x > 0 for x in d)
                or _prod(d) != extent or d[-1] > max_innermost_factor):
            raise ScheduleError(f"sample_perfect_tile: decision {d} is not {n} positive factors "
                                f"of {extent} with innermost <= {max_innermost_factor}")
        return d
    options = perfect_tilings(extent, n, max_innermost_factor)
    return list(options[rng.randrange(len(options))])


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def sample_categorical(candidates: list, probs: list, rng: random.Random, decision=None) -> int:
    """Index of the chosen candidate, drawn with the given probabilities."""
    if not candidates or len(candidates) != len(probs):
        raise ScheduleError(f"sample_categorical: {len(candidates)} candidates but "
                            f"{len(probs)} probabilities; give one probability per candidate")
    if any(p < 0 for p in probs) or sum(probs) <= 0:
        raise ScheduleError("sample_categorical: probabilities must be >= 0 and not all 0")
    if decision is not None:
        if not isinstance(decision, int) or not 0 <= decision < len(candidates):
            raise ScheduleError(f"sample_categorical: decision {decision!r} is not an index into "
                                f"{len(candidates)} candidates")
        return decision
    x = rng.random() * sum(probs)
    acc = 0.0
    for i, p in enumerate(probs):
        acc += p
        if x < acc:
            return i
    return len(probs) - 1


def sample_location(options: list, rng: random.Random, decision=None) -> int:
    """Pick one of ``options`` (-2 inline, -1 root, k >= 0 a loop index)."""
    if decision is not None:
        if decision not in options:
            raise ScheduleError(f"sample_compute_location: decision {decision!r} is not a legal "
                                f"location here; legal: {options}")
        return decision
    return options[rng.randrange(len(options))]
