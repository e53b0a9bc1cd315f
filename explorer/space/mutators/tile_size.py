"""Mutate tile size: move a factor between two levels of one tiling, or pick another
cooperative-fetch vector length."""
from __future__ import annotations

from .. import analysis as A
from ..mutator import Mutator
from ..register_tiles import FIT_SHARE, register_tiles
from .gpu_limits import GPUTilingLimits
from .unroll import categorical_uses, other_choice

_TRIES = 32
TRADE_SHARE = 0.25      # share of a fitting register tile's moves that reshape it


def _divisors(n: int) -> list:
    return [d for d in range(2, n + 1) if n % d == 0]


class MutateTileSize(Mutator):
    """Pick, uniformly among the trace's ``sample_perfect_tile`` decisions and the
    cooperative-fetch vector lengths (as MetaSchedule's ``MutateTileSize``), one to change.
    A tiling changes by dividing one factor by one of its divisors and multiplying
    another by it: the product (the loop extent) is kept, the innermost factor stays
    within ``max_innermost_factor``::

        [4, 1, 16, 2]  ->  [1, 4, 16, 2]   (4 moved from level 0 to level 1)

    On a GPU target a move must also keep the block within the limits ``VerifyGPUCode``
    checks, worked out from the decisions alone (``GPUTilingLimits``): threads per block
    (the factors bound to threadIdx) within the target's maximum and at least the warp
    the tiling asks for, at most ``max_vthread`` virtual threads, and the shared-memory
    tiles within ``max_shared_memory_per_block``; a vector length must fit a GPU vector
    (and keeps the tiles within the shared memory: it sets how the copy is rounded).
    A move that breaks one is not proposed: another random move is drawn (up to
    ``_TRIES``), then one among all the legal moves of all tilings; None when there is none.
    MetaSchedule proposes such moves and lets the postprocessors reject them; measured
    here that was 1 mutation in 6 on gemm and conv2d.

    On a CPU target the moves keep the register tiles (``register_tiles``: the innermost
    spatial tile of a multi-level tiling, unrolled and vectorized) within the budget the
    sampler draws them in (``RegisterTile.fits``). A child of a parent whose register
    tile fits is drawn as above and drawn again until its tile still fits (the moves
    conditioned on the fit; when no random draw keeps it, one among all the moves of all
    tilings that do; when none does, an unconditioned move). With probability
    ``TRADE_SHARE`` the register tile is reshaped instead (``_reshape``): the tiling
    drawn moves a factor into or out of its innermost level, and another tiling of the
    tile may do the same, the tile still fitting (``4 x 64 -> 8 x 32``, the same
    accumulators in another shape: one move at a time passes through a worse tile that
    the cost model may never keep). A parent whose tile does not fit is reshaped so that
    it fits with probability ``FIT_SHARE`` (as many draws of the sampler), else moved
    uniformly: one uniform move rarely repairs a tile (a 1 x 4 tile, one accumulator,
    needs two). Measured on 40 draws of gemm 1024^3 (AVX-512), 20 children each: uniform
    moves keep 73% of the fitting parents' children fitting (conv2d 3x3 64 -> 64 at
    56x56: 85%), these 100%.
    ``keep_register_tile=False`` moves factors uniformly, as before.
    """

    def __init__(self, keep_register_tile: bool = True):
        self.keep_register_tile = keep_register_tile

    def __repr__(self) -> str:
        return ("MutateTileSize()" if self.keep_register_tile
                else "MutateTileSize(keep_register_tile=False)")

    def apply(self, trace, rng, workload):
        tiles = [i for i in trace.sampling_indices()
                 if trace.insts[i].kind == "sample_perfect_tile" and i in trace.decisions
                 and len(trace.decisions[i]) > 1 and any(f > 1 for f in trace.decisions[i])]
        vectors = [i for i in categorical_uses(trace, is_fetch_length)
                   if len(trace.insts[i].inputs[0]) > 1]
        if not tiles and not vectors:
            return None
        limits = self._limits(trace, workload)
        n = rng.randrange(len(tiles) + len(vectors))
        if n >= len(tiles):
            idx = vectors[n - len(tiles)]
            allowed = None
            if limits is not None:
                allowed = [k for k, v in enumerate(trace.insts[idx].inputs[0])
                           if limits.vector_ok(idx, v) and _legal(limits, trace, idx, k)]
            return other_choice(trace, idx, rng, allowed)
        if limits is None:
            return self._move_in_registers(trace, tiles, tiles[n], rng, workload)
        return self._move_factor(trace, tiles, tiles[n], rng, limits)

    def _move_in_registers(self, trace, tiles: list, first: int, rng, workload):
        """A move of a CPU tiling that keeps the register tiles that fit fitting (see the
        class docstring); a uniform move when there are none."""
        regs = self._register_tiles(trace, workload)
        keep = [r for r in regs if r.fits(trace.decisions)]
        mine = [r for r in regs if first in r.tiles]
        if mine and (mine[0] not in keep and rng.random() < FIT_SHARE
                     or mine[0] in keep and rng.random() < TRADE_SHARE):
            got = _reshape(trace, mine[0], first, rng)
            if got is not None and all(r.fits(got.decisions) for r in keep):
                return got
        if not keep:
            return self._move_factor(trace, tiles, first, rng)
        return (self._move_factor(trace, tiles, first, rng, _Fits(keep))
                or self._move_factor(trace, tiles, first, rng))

    def _register_tiles(self, trace, workload) -> list:
        if not self.keep_register_tile or self.target is None or self.target.is_gpu:
            return []
        func = getattr(workload, "func", workload)
        return register_tiles(trace, func, self.target)

    def _limits(self, trace, workload):
        """The GPU limits of the trace's tilings, or None (not a GPU target, or nothing the
        limits depend on)."""
        if self.target is None or not self.target.is_gpu:
            return None
        func = getattr(workload, "func", workload)
        limits = GPUTilingLimits(trace, func, self.target)
        return limits if limits.blocks else None

    @staticmethod
    def _move_factor(trace, tiles: list, first: int, rng, limits=None):
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
                if limits is None or _legal(limits, trace, i, factors):
                    return trace.with_decision(i, factors)
            i = rng.choice(tiles)
        if limits is None:
            return None
        moves = [(i, new) for i in tiles for new in _moves(trace, i)
                 if _legal(limits, trace, i, new)]
        if not moves:
            return None
        i, new = rng.choice(moves)
        return trace.with_decision(i, new)


class _Fits:
    """The ``limits`` of ``_move_factor`` on a CPU: every one of ``regs`` (register tiles)
    fits the decisions."""

    fetch_bytes: dict = {}

    def __init__(self, regs: list):
        self.regs = regs
        self.tile_insts = {i for r in regs for i in r.tiles}

    def violation(self, decisions: dict):
        bad = [r.name for r in self.regs if not r.fits(decisions)]
        return f"register tile of {', '.join(bad)} does not fit" if bad else None


def _reshape(trace, reg, first: int, rng):
    """``trace`` with register tile ``reg`` reshaped to fit: tiling ``first`` moves a
    factor into or out of its innermost level and, or not, another tiling of ``reg`` does
    too (``4 x 64 -> 8 x 32``: a factor of one tile dimension traded for another's);
    drawn uniformly among the results that fit and differ from ``trace``; None when
    there is none."""
    inner = {p.inst: p.pos for p in reg.parts if p.inst is not None}
    if first not in inner:
        return None
    dec = trace.decisions
    mine = _level_moves(dec[first], inner[first], trace.insts[first].inputs[2])
    out = []
    for other in sorted(inner):
        if other == first:
            continue
        theirs = [dec[other]] + _level_moves(dec[other], inner[other],
                                             trace.insts[other].inputs[2])
        out += [(other, a, b) for a in mine for b in theirs
                if reg.fits({**dec, first: a, other: b})]
    if not out and len(inner) == 1:
        out = [(first, a, a) for a in mine if reg.fits({**dec, first: a})]
    if not out:
        return None
    other, a, b = out[rng.randrange(len(out))]
    return trace.with_decision(first, a).with_decision(other, b)


def _level_moves(factors, pos: int, max_inner: int) -> list:
    """Every tiling one move from ``factors`` that moves a factor out of position ``pos``
    or into it, the innermost factor within ``max_inner``."""
    last = len(factors) - 1
    out = []
    for other in range(len(factors)):
        if other == pos:
            continue
        for x, y in ((pos, other), (other, pos)):
            for d in _divisors(factors[x]):
                new = list(factors)
                new[x] //= d
                new[y] *= d
                if new[last] <= max_inner:
                    out.append(new)
    return out


def _legal(limits, trace, i: int, decision) -> bool:
    """Whether sampling instruction ``i`` may take ``decision`` under ``limits``."""
    if i not in limits.tile_insts and i not in limits.fetch_bytes:
        return True
    return limits.violation({**trace.decisions, i: decision}) is None


def _moves(trace, i: int) -> list:
    """Every tiling one move away from decision ``i`` (in a fixed order)."""
    factors = trace.decisions[i]
    max_inner = trace.insts[i].inputs[2]
    last = len(factors) - 1
    out = []
    for x, fx in enumerate(factors):
        for y in range(len(factors)):
            if y == x:
                continue
            for d in _divisors(fx):
                if y == last and factors[y] * d > max_inner:
                    continue
                new = list(factors)
                new[x] //= d
                new[y] *= d
                out.append(new)
    return out


def is_fetch_length(ins, x) -> bool:
    """Does ``ins`` use categorical value ``x`` as a cooperative fetch's vector length?"""
    return ins.kind == "annotate" and ins.inputs[1] == A.COOPERATIVE_FETCH and ins.inputs[2] is x
