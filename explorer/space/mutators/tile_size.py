"""Mutate tile size: move a factor between two levels of one tiling, or pick another
cooperative-fetch vector length."""
from __future__ import annotations

from .. import analysis as A
from ..mutator import Mutator
from .unroll import categorical_uses, other_choice

_TRIES = 32


def _divisors(n: int) -> list:
    return [d for d in range(2, n + 1) if n % d == 0]


class MutateTileSize(Mutator):
    """Pick, uniformly among the trace's ``sample_perfect_tile`` decisions and the
    cooperative-fetch vector lengths (as MetaSchedule's ``MutateTileSize``), one to change.
    A tiling changes by dividing one factor by one of its divisors and multiplying
    another by it: the product (the loop extent) is kept, the innermost factor stays
    within ``max_innermost_factor``::

        [4, 1, 16, 2]  ->  [1, 4, 16, 2]   (4 moved from level 0 to level 1)
    """

    def apply(self, trace, rng, workload):
        tiles = [i for i in trace.sampling_indices()
                 if trace.insts[i].kind == "sample_perfect_tile" and i in trace.decisions
                 and len(trace.decisions[i]) > 1 and any(f > 1 for f in trace.decisions[i])]
        vectors = [i for i in categorical_uses(trace, _is_fetch_length)
                   if len(trace.insts[i].inputs[0]) > 1]
        if not tiles and not vectors:
            return None
        n = rng.randrange(len(tiles) + len(vectors))
        if n >= len(tiles):
            return other_choice(trace, vectors[n - len(tiles)], rng)
        return self._move_factor(trace, tiles, tiles[n], rng)

    @staticmethod
    def _move_factor(trace, tiles: list, first: int, rng):
        i = first
        for _ in range(_TRIES):
            factors = list(trace.decisions[i])
            max_inner = trace.insts[i].inputs[2]
            x = rng.choice([k for k in range(len(factors)) if factors[k] > 1])
            y = rng.choice([k for k in range(len(factors)) if k != x])
            divs = _divisors(factors[x])
            if y == len(factors) - 1:
                divs = [d for d in divs if factors[y] * d <= max_inner]
            if divs:
                d = rng.choice(divs)
                factors[x] //= d
                factors[y] *= d
                return trace.with_decision(i, factors)
            i = rng.choice(tiles)
        return None


def _is_fetch_length(ins, x) -> bool:
    return ins.kind == "annotate" and ins.inputs[1] == A.COOPERATIVE_FETCH and ins.inputs[2] is x
