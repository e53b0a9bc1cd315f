"""Register tiles: on a CPU target, draws of a multi-level tiling favour innermost tiles
that fill the target's vector registers.

The innermost spatial level of a multi-level tiling (``i3 j3`` of ``SSRSRS``, inside
the last reduction loop) is the register tile: lowering unrolls it, the innermost loop
is vectorized, and LLVM keeps the tile's accumulators in vector registers across the
reduction loop around it when they fit. A tile is fast when

- the vectorized factor (the innermost loop of the reordered nest) is a multiple of the
  target's lanes for the block's dtype (no partial vectors), where the loop's extent
  allows one, and
- its accumulators, ``ceil(vector factor / lanes)`` times the other register-tile
  factors, are enough to hide the fused multiply-add latency (at least a quarter of the
  vector registers) and leave registers for the operands of one reduction step: a row
  of ``ceil(vector factor / lanes)`` vector loads and one broadcast (the rest), and are
  at most three quarters of the vector registers (``max_accumulators``: 24 of
  AVX-512's 32, 12 of AVX2's 16; the expert schedule's gemm tile takes the same budget).
  Measured on ResNet-18 C6 (the 434 distinct candidates of eight 64-trial runs, timed
  again on one core of the 2-core Xeon, median GFLOP/s): 8 accumulators 129, 14 132,
  16 126, 28 99 (115 of the 434, a quarter of the budget spent on a tile that spills
  or reloads); the fastest candidates of each size 150, 165, 166, 151. A cap of 16
  also kept the search from BERT's 8 x 48 gemm tile (24 accumulators, 3 B vectors and
  a broadcast: 28 registers), which the expert measured faster than 4 x 64 (one core,
  128x768x768: 0.88 -> 0.97x PyTorch), and search alone reached 0.88 of the seeded
  run on it; with three quarters, 28 accumulators stay out and 24 come in.

Every perfect tiling equally likely (``sample_perfect_tile``) puts a few percent of the
draws there: gemm 1024^3 has 266 tilings of each spatial loop, and the hand-written
expert schedule (a 4 x 64 tile, 16 accumulators of AVX-512's 32 registers) is one of
about 10^7 points of the space. ``sample_register_tiles`` draws a tiling's decisions as
its instructions do and draws again, up to ``DRAWS`` times, until the register tile
fits (the instructions' distribution conditioned on the fit), for a share ``FIT_SHARE``
of the draws; the other draws stay unconditioned, so the whole space stays reachable.
Lanes and registers are read from the Target (AVX2: 8 lanes, 16 registers; AVX-512:
16 and 32), nothing about the operator is assumed: the register tile is read from the
sketch's trace (the loops after the last reduction loop of the tiling's last
``reorder``), so a user's own operator tiled by the rule gets the same.

Where the sketch packs an input (multi-level tiling's read cache, computed at a loop of
the tiling: the expert's B panel), the tile also asks the packed copy to fit in
``PANEL_SHARE`` of the target's L2 (``PackedPanel``): 56% of uniform tilings of gemm
1024^3 copy panels of 1-4 MiB, which the kernel streams from memory; a packed sketch
then looks no better than an unpacked one (which runs at a third of the expert's
speed), and the search alone measured 5 packed candidates of 64, 2 of them with a
panel within 512 KiB (seed 0, before this condition). The copy's size is read from the
block's index expressions and the tiles inside the copy's loop.

On a target of several cores the tile also asks the first tile level (the spatial
loops outside everything a sketch computes at a tile: the loops its parallel loop
fuses) for at least one iteration per core (``RegisterTile.parallel``): a draw with
all of them 1 runs on one thread. Under load such a kernel times about as fast as
a parallel one, and the search alone kept it: the best C6 kernels of two runs alone
on a loaded 2-core Xeon had one thread (k0 = p0 = q0 = 1 in the channel sketch, or
the parallel limit mutated to 1), 0.85 of the seeded run's once the load fell.
"""
from __future__ import annotations

import random
import weakref

from ..errors import ExplorerError
from ..ir.arith import linear_form
from ..schedule.sampling import perfect_tilings
from ..schedule.tree import find_block
from . import analysis as A

FIT_SHARE = 0.8         # share of the draws conditioned on a fitting register tile
ACCUMULATOR_SHARE = 0.75   # of the vector registers, the most a register tile's accumulators use


def max_accumulators(registers: int) -> int:
    """The most vector accumulators a register tile may hold on a target of ``registers``
    vector registers (module docstring): 24 of 32, 12 of 16."""
    return int(registers * ACCUMULATOR_SHARE)
DRAWS = 256             # draws per tiled block before giving up the condition
_BYTES = {"float32": 4, "float64": 8, "float16": 2, "int32": 4, "int8": 1}
_SKETCH_TILES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _Part:
    """A factor of iteration variable ``var`` (index among the block's variables):
    position ``pos`` of the decision of ``sample_perfect_tile`` ``inst``, or the whole
    loop (``inst`` None) of ``extent``."""
    __slots__ = ("var", "kind", "inst", "pos", "extent")

    def __init__(self, var: int, kind: str, inst, pos: int, extent: int):
        self.var, self.kind, self.inst, self.pos, self.extent = var, kind, inst, pos, extent

    def factor(self, decisions: dict) -> int:
        return self.extent if self.inst is None else decisions[self.inst][self.pos]


class RegisterTile:
    """The register tile of one multi-level tiled block of a sketch: its parts (the
    loops after the last reduction loop, innermost last), the tiling instructions of
    its variables (index -> extent tiled), the lanes for the block's dtype, the fewest
    accumulators (``low``) and the vector registers (``high``) of the target."""

    def __init__(self, name: str, parts: list, tiles: dict, lanes: int, low: int, high: int,
                 vector_extent: int, panels: tuple = (), outer: list = (), tasks: int = 1):
        self.name, self.parts, self.tiles = name, parts, tiles
        self.lanes, self.low, self.high = lanes, low, high
        self.vector_extent = vector_extent   # extent the vectorized loop's tiling tiles
        self.panels = tuple(panels)          # the block's packed copies (PackedPanel)
        self.outer = list(outer)             # the spatial parts of the first tile level
        self.tasks = tasks                   # the parallel tasks they should give at least

    def parallel(self, decisions: dict) -> bool:
        """The first tile level (the loops every sketch's parallel loop fuses: a packed
        copy or a write cache sits below them) gives at least ``tasks`` iterations (the
        target's cores, fewer when the extents outside the register tile allow fewer);
        True while a tiling it depends on has no decision."""
        if self.tasks <= 1 or any(p.inst not in decisions for p in self.outer):
            return True
        n, room = 1, 1
        for p in self.outer:
            n *= p.factor(decisions)
        for p in self.parts:
            if p.inst in decisions:
                room *= p.factor(decisions)
        total = 1
        for i, ext in self.tiles.items():
            if any(p.inst == i for p in self.outer):
                total *= ext
        return n >= min(self.tasks, max(1, total // room))

    def accumulators(self, decisions: dict) -> int:
        *outer, vec = self.parts
        n = -(-vec.factor(decisions) // self.lanes)
        for p in outer:
            n *= p.factor(decisions)
        return n

    def fits(self, decisions: dict) -> bool:
        """The tile fits the vector registers and every packed panel of the block its
        share of the L2 (``PackedPanel.fits``)."""
        vec = self.parts[-1].factor(decisions)
        if self.vector_extent % self.lanes == 0 and vec % self.lanes:
            return False
        operands = -(-vec // self.lanes) + 1     # a row of vector loads, one broadcast
        return (self.low <= self.accumulators(decisions)
                <= min(max_accumulators(self.high), self.high - operands)
                and all(p.fits(decisions) for p in self.panels) and self.parallel(decisions))


class PackedPanel:
    """The packed copy of an input (multi-level tiling's read cache, computed at a loop
    of the tiling): the region of the buffer the loops inside that loop read is copied
    once per iteration of the loops outside it, and the kernel streams the copy from
    the L2. It fits when it takes at most ``share`` of the target's L2: measured on gemm
    1024^3 (AVX-512, 1 MiB L2, the expert's other decisions) a 256 KiB panel (64
    columns) ran at the expert's speed, 512 KiB at 0.9 of it, 1 MiB at 0.7, the whole
    of B (4 MiB: the copy at a loop of one iteration) at 0.35. ``dims``: per dimension
    of the buffer, (iteration variable index, |coefficient|) pairs of its index."""

    def __init__(self, buffer: str, dims: list, inner: list, item_bytes: int, budget: int,
                 shape: tuple):
        self.buffer, self.dims, self.inner = buffer, dims, inner
        self.item_bytes, self.budget, self.shape = item_bytes, budget, shape

    def footprint(self, decisions: dict) -> int:
        """Bytes of the copy: per dimension, the span its index takes over the loops
        inside the copy's loop (``1 + sum |c| (extent - 1)``, at most the dimension)."""
        extent: dict = {}
        for part in self.inner:
            extent[part.var] = extent.get(part.var, 1) * part.factor(decisions)
        n = self.item_bytes
        for terms, size in zip(self.dims, self.shape):
            n *= min(size, 1 + sum(c * (extent.get(v, 1) - 1) for v, c in terms))
        return n

    def fits(self, decisions: dict) -> bool:
        """At most the budget; True while a tiling it depends on has no decision."""
        if any(p.inst is not None and p.inst not in decisions for p in self.inner):
            return True
        return self.footprint(decisions) <= self.budget


PANEL_SHARE = 0.5       # share of the L2 a packed panel may take


def register_tiles(trace, func, target) -> list:
    """The ``RegisterTile`` of every multi-level tiled block of ``trace`` (a sketch) whose
    tiling the trace shows: get_loops, sample_perfect_tile, split and reorder on the
    block's own loops, the innermost loop spatial."""
    bits = getattr(target, "vector_bits", 0) or 0
    regs = getattr(target, "vector_registers", 0) or 0
    if target is None or target.is_gpu or bits <= 0 or regs < 4:
        return []
    seen = _Follower(func)
    for idx, ins in enumerate(trace.insts):
        step = getattr(seen, ins.kind, None)
        if step is not None:
            step(idx, ins.inputs, ins.outputs)
    out = []
    for name, order in seen.last_order.items():
        r = max((n for n, p in enumerate(order) if p.kind != "S"), default=-1)
        parts = order[r + 1:]
        if not parts or parts[-1].kind != "S" or parts[-1].inst is None:
            continue
        block = seen.tiled[name]
        lanes = max(1, bits // (8 * _BYTES.get(block.body.buffer.dtype, 4)))
        # the tilings a draw conditions: those of the loops the last reorder named (the
        # whole nest's, or the channel sketch's register tile alone)
        tiles = {p.inst: seen.extent_of[p.inst] for p in seen.last_given[name]
                 if p.inst is not None}
        outer = [p for p in order if p.kind == "S" and p.inst in tiles and p.pos == 0]
        out.append(RegisterTile(name, parts, tiles, lanes, max(1, regs // 4), regs,
                                tiles[parts[-1].inst], seen.panels_of(name, order, target),
                                outer, max(1, getattr(target, "num_cores", 1) or 1)))
    return out


class _Follower:
    """Follows the instructions of a trace that tile a block (one method per kind)."""

    def __init__(self, func):
        self.func = func
        self.blocks: dict = {}      # BlockRV -> block name
        self.tiled: dict = {}       # block name -> Block, for blocks with a tiling structure
        self.done: set = set()      # blocks whose loops were taken (later get_loops ignored)
        self.loop_part: dict = {}   # LoopRV -> (block name, _Part)
        self.factor_of: dict = {}   # ExprRV -> (sample_perfect_tile index, position)
        self.extent_of: dict = {}   # sample_perfect_tile index -> extent it tiles
        self.last_order: dict = {}  # block name -> [_Part] in its order after the last reorder
        self.last_given: dict = {}  # block name -> [_Part] its last reorder named
        self.reads: dict = {}       # BlockRV of a read cache -> (block name, read index)
        self.copies: list = []      # (block name, read index, _Part of the copy's loop)

    def get_block(self, idx, inp, out):
        self.blocks[out[0]] = inp[0]

    def annotate(self, idx, inp, out):
        if inp[1] == A.TILING_STRUCTURE and inp[0] in self.blocks:
            name = self.blocks[inp[0]]
            try:
                self.tiled[name] = find_block(self.func, name)[0].block
            except ExplorerError:
                pass

    def get_loops(self, idx, inp, out):
        name = self.blocks.get(inp[0])
        if name not in self.tiled or name in self.done:
            return
        ivs = self.tiled[name].iter_vars
        self.done.add(name)
        if len(out) == len(ivs):
            for n, (lp, iv) in enumerate(zip(out, ivs)):
                self.loop_part[lp] = (name, _Part(n, iv.kind, None, 0, iv.extent))

    def sample_perfect_tile(self, idx, inp, out):
        if inp[0] in self.loop_part:
            for pos, v in enumerate(out):
                self.factor_of[v] = (idx, pos)
            self.extent_of[idx] = self.loop_part[inp[0]][1].extent

    def split(self, idx, inp, out):
        if inp[0] not in self.loop_part:
            return
        name, whole = self.loop_part[inp[0]]
        if len(out) == 1 and len(inp[1]) == 1 and isinstance(inp[1][0], int):
            # a padded extent (MultiLevelTiling.padded_extent), tiled next
            self.loop_part[out[0]] = (name, _Part(whole.var, whole.kind, None, 0, inp[1][0]))
            return
        facs = [self.factor_of.get(f) for f in inp[1]]
        if all(f is not None for f in facs):
            for lp, (i, pos) in zip(out, facs):
                self.loop_part[lp] = (name, _Part(whole.var, whole.kind, i, pos, 0))

    def cache_read(self, idx, inp, out):
        name = self.blocks.get(inp[0])
        if name in self.tiled and out:
            self.reads[out[0]] = (name, inp[1])

    def compute_at(self, idx, inp, out):
        if inp[0] in self.reads and inp[1] in self.loop_part:
            name, index = self.reads[inp[0]]
            at_name, part = self.loop_part[inp[1]]
            if at_name == name:
                self.copies.append((name, index, part))

    def panels_of(self, name: str, order: list, target) -> list:
        """The ``PackedPanel`` of each read cache of block ``name`` computed at one of the
        loops of its last reorder ``order``."""
        block = self.tiled[name]
        names = {iv.var.name: n for n, iv in enumerate(block.iter_vars)}
        budget = int(PANEL_SHARE * (getattr(target, "l2_bytes", 0) or 0))
        out = []
        for bname, index, part in self.copies:
            reads = block.reads()
            if bname != name or index >= len(reads) or part not in order or budget <= 0:
                continue
            buf = reads[index]
            dims = _index_terms(block.read_indices(buf)[0], names)
            if dims is None:
                continue
            out.append(PackedPanel(buf.name, dims, order[order.index(part) + 1:],
                                   _BYTES.get(buf.dtype, 4), budget, tuple(buf.shape)))
        return out

    def reorder(self, idx, inp, out):
        """The block's loop order after ``reorder``: the loops given take, in their new
        order, the places they held in the previous order when they all were in it (the
        channel sketch reorders the register tile alone: the rest of the nest stays, and
        with it the loop its packed copy is computed at); else the loops given."""
        if inp and all(lp in self.loop_part for lp in inp):
            names = {self.loop_part[lp][0] for lp in inp}
            if len(names) == 1:
                name = names.pop()
                parts = [self.loop_part[lp][1] for lp in inp]
                self.last_given[name] = parts
                prev = self.last_order.get(name, [])
                at = [n for n, p in enumerate(prev) if any(p is q for q in parts)]
                if len(at) == len(parts) < len(prev):
                    order = list(prev)
                    for n, p in zip(at, parts):
                        order[n] = p
                    parts = order
                self.last_order[name] = parts


def _index_terms(indices, names: dict):
    """Per index, [(iteration variable index, |coefficient|)] of its linear form; None
    when one is not linear in the block's variables."""
    out = []
    for e in indices:
        terms, _ = linear_form(e)
        dim = []
        for atom, c in terms.items():
            n = names.get(getattr(atom, "name", None))
            if n is None or not isinstance(c, int):
                return None
            dim.append((n, abs(c)))
        out.append(dim)
    return out


def sample_register_tiles(sketch, func, target, seed: int, draws: int = DRAWS,
                          share: float | None = None) -> dict:
    """Decisions {instruction index: factors} for the multi-level tilings of ``sketch``
    (a Schedule whose trace holds the sampling instructions): with probability
    ``share`` (default: the module's ``FIT_SHARE``) per tiled block, perfect tilings drawn uniformly and drawn again until the
    register tile fits (see the module docstring); otherwise, or when no draw fits in
    ``draws``, no decisions (the instructions sample them as before). The same seed
    gives the same decisions, from a random stream of their own."""
    cached = _SKETCH_TILES.get(sketch)
    if cached is None or cached[0] is not func or cached[1] != target:
        cached = (func, target, register_tiles(sketch.trace, func, target))
        _SKETCH_TILES[sketch] = cached
    share = FIT_SHARE if share is None else share
    rng = random.Random(f"cpu register tiles {seed}")
    out: dict = {}
    for tile in cached[2]:
        if rng.random() >= share:
            continue
        options = [(i, perfect_tilings(ext, *sketch.trace.insts[i].inputs[1:3]))
                   for i, ext in tile.tiles.items() if i not in out]
        for _ in range(draws):
            d = dict(out)
            for i, opts in options:
                d[i] = list(opts[rng.randrange(len(opts))])
            if tile.fits(d):
                out = d
                break
    return out
