"""Sampling instructions: the random choices that make a schedule a probabilistic program.

Each takes a ``random.Random`` and returns a decision; a decision given back
replays the same choice. Decisions are plain JSON values.
"""
from __future__ import annotations

import functools
import math
import numbers
import random
from collections.abc import Sequence

from ..errors import ScheduleError
from ..limits import MAX_EXTENT, MAX_TILE_PARTS


class PerfectTilings(Sequence):
    """Every n-tuple of positive ints with product ``extent`` and innermost <= max, in
    lexicographic order, without listing them: ``len`` counts them and ``[k]`` builds
    the k-th factor by factor (time and memory polynomial in n and the divisors)."""

    def __init__(self, extent: int, n: int, max_innermost: int):
        _check_tile_args(extent, n, max_innermost)
        self.extent, self.n, self.max_innermost = extent, n, max_innermost
        self._divs = _divisors(extent)
        self._memo: dict = {}
        self._subs: dict = {}

    def _divisors_of(self, rest: int) -> tuple:
        """Divisors of ``rest`` (a divisor of the extent), ascending."""
        if rest not in self._subs:
            self._subs[rest] = tuple(d for d in self._divs if d <= rest and rest % d == 0)
        return self._subs[rest]

    def _count(self, rest: int, k: int) -> int:
        """Tilings of ``rest`` into ``k`` factors (innermost bounded)."""
        if k == 1:
            return 1 if rest <= self.max_innermost else 0
        key = (rest, k)
        if key not in self._memo:
            self._memo[key] = sum(self._count(rest // d, k - 1)
                                  for d in self._divisors_of(rest))
        return self._memo[key]

    def __len__(self) -> int:
        return self._count(self.extent, self.n)

    def __getitem__(self, index: int) -> tuple:
        if not 0 <= index < len(self):
            raise IndexError(index)
        out, rest = [], self.extent
        for k in range(self.n, 1, -1):
            for d in self._divisors_of(rest):
                c = self._count(rest // d, k - 1)
                if index < c:
                    break
                index -= c
            out.append(d)
            rest //= d
        return tuple(out + [rest])


def perfect_tilings(extent: int, n: int, max_innermost: int) -> PerfectTilings:
    """The valid tilings (a lazy sequence: ``len`` and indexing, nothing enumerated)."""
    _check_tile_args(extent, n, max_innermost)
    return _tilings(extent, n, max_innermost)


@functools.lru_cache(maxsize=1024)
def _tilings(extent: int, n: int, max_innermost: int) -> PerfectTilings:
    return PerfectTilings(extent, n, max_innermost)


@functools.lru_cache(maxsize=1024)
def _divisors(x: int) -> tuple:
    small = [d for d in range(1, math.isqrt(x) + 1) if x % d == 0]
    return tuple(sorted(set(small + [x // d for d in small])))


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_tile_args(extent: int, n, max_innermost) -> None:
    if not _is_int(n) or not 1 <= n <= MAX_TILE_PARTS:
        raise ScheduleError(f"sample_perfect_tile: n must be an int in [1, {MAX_TILE_PARTS}], "
                            f"got {n!r}")
    if not _is_int(max_innermost) or not 1 <= max_innermost <= MAX_EXTENT:
        raise ScheduleError(f"sample_perfect_tile: max_innermost_factor must be an int in "
                            f"[1, {MAX_EXTENT}] (no loop is longer), got {max_innermost!r}")
    if n == 1 and extent > max_innermost:
        raise ScheduleError(f"sample_perfect_tile: n=1 keeps the whole extent {extent} "
                            f"innermost, more than max_innermost_factor={max_innermost}; "
                            f"use n >= 2 or max_innermost_factor >= {extent}")


def sample_perfect_tile(extent: int, n: int, max_innermost_factor: int, rng: random.Random,
                        decision=None) -> list:
    """n factors of ``extent``, innermost at most ``max_innermost_factor``.

    Unlike TVM, which spreads prime factors at random, every valid tiling is
    equally likely here: small spaces are then covered evenly."""
    _check_tile_args(extent, n, max_innermost_factor)
    if decision is not None:
        return _check_tile_decision(decision, extent, n, max_innermost_factor)
    options = _tilings(extent, n, max_innermost_factor)
    return list(options[rng.randrange(len(options))])


def _check_tile_decision(decision, extent: int, n: int, max_inner: int) -> list:
    d = list(decision) if isinstance(decision, (list, tuple)) else None
    if (d is None or len(d) != n or not all(_is_int(x) and x > 0 for x in d)
            or _prod(d) != extent or d[-1] > max_inner):
        raise ScheduleError(f"sample_perfect_tile: decision {decision!r} is not {n} positive "
                            f"factors of {extent} with innermost <= {max_inner}")
    return d


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def check_probs(probs: list) -> None:
    """Probabilities a trace may record: finite numbers >= 0 with a finite sum above 0."""
    if not all(_is_real(p) and math.isfinite(p) and p >= 0 for p in probs) \
            or not 0 < sum(probs) < math.inf:
        raise ScheduleError(f"sample_categorical: probabilities must be finite numbers >= 0 "
                            f"with a finite sum above 0; got {probs!r}")


def _is_real(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def sample_categorical(candidates, probs, rng: random.Random, decision=None) -> int:
    """Index of the chosen candidate, drawn with the given probabilities (weights of any
    scale, numpy numbers included)."""
    if not len(candidates) or len(candidates) != len(probs):
        raise ScheduleError(f"sample_categorical: {len(candidates)} candidates but "
                            f"{len(probs)} probabilities; give one probability per candidate")
    if not all(_is_real(p) for p in probs) or any(p < 0 for p in probs) or sum(probs) <= 0:
        raise ScheduleError("sample_categorical: probabilities must be numbers >= 0 and not "
                            f"all 0; got {probs!r}")
    if decision is not None:
        if not _is_int(decision) or not 0 <= decision < len(candidates):
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
        if not _is_int(decision) or decision not in options:
            raise ScheduleError(f"sample_compute_location: decision {decision!r} is not a legal "
                                f"location here; legal: {options}")
        return decision
    return options[rng.randrange(len(options))]
