"""The Schedule: primitives on handles, each call recorded in the trace.

    sch = Schedule(ops.gemm(64, 64, 64), seed=0)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 8])
    sch.vectorize(sch.split(j, [None, 16])[1])

Every primitive checks its preconditions and raises ``ScheduleError`` naming
the primitive, the loop or block and the rule it would break; after an error
the schedule is unchanged (the function is immutable: a primitive computes a
new one and only then commits it).
"""
from __future__ import annotations

import functools
import math
import random

import numpy as np

from ..errors import ScheduleError
from ..ir.stmt import BlockRealize, For, PrimFunc
from . import block_prims, cache_prims, layout_prims, loop_prims, reduction_prims, sampling
from .rv import INLINE, ROOT, RV, BlockRV, ExprRV, LoopRV
from .trace import Instruction, Trace
from .tree import (block_names, find_block, find_loop, loops_of, readers, realizes_in,
                   set_annotations, writers)
from ..ir.index import index_of


def _atomic(method):
    """All or nothing: a primitive made of several steps (``tile``) restores the schedule
    (function, trace, decisions, handles, random state) when any step raises."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        saved = self._state()
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self._set_state(saved)
            raise
    return wrapper


class Schedule:
    """A function being scheduled, its trace, and the random state of its sampling."""

    def __init__(self, func, seed: int = 0):
        self.workload = None
        if not isinstance(func, PrimFunc):
            self.workload = func
            func = getattr(func, "func", None)
        if not isinstance(func, PrimFunc):
            raise ScheduleError(f"Schedule takes a PrimFunc or a Workload, not "
                                f"{type(self.workload).__name__}")
        if not isinstance(seed, int):
            raise ScheduleError(f"Schedule seed must be an int, got {seed!r}")
        self.func = func
        self.original = func
        self.seed = seed
        self._rng = random.Random(seed)
        self._table: dict = {}
        self._insts: list = []
        self._decisions: dict = {}

    # ------------------------------------------------------------ basics
    @property
    def func(self) -> PrimFunc:
        """The function as scheduled so far. Annotations and loop kinds (``parallel``,
        ``vectorize``, ``unroll``) are applied when it is next asked for: a run of them (a
        sketch annotates every block, postprocessing takes the annotations off again and
        unrolls loop after loop) rebuilds it once, not per call."""
        if self._pending:
            self._func, self._pending = set_annotations(self._func, self._pending), None
        return self._func

    @func.setter
    def func(self, value: PrimFunc) -> None:
        self._func, self._pending = value, None

    @property
    def trace(self) -> Trace:
        return Trace(list(self._insts), dict(self._decisions))

    def copy(self) -> "Schedule":
        """An independent copy: same function, trace and random state; handles stay valid."""
        out = Schedule.__new__(Schedule)
        out.__dict__.update(self.__dict__)
        out._rng = random.Random()
        out._rng.setstate(self._rng.getstate())
        out._table = dict(self._table)
        out._insts = list(self._insts)
        out._decisions = dict(self._decisions)
        return out

    def _state(self) -> tuple:
        return (self.func, dict(self._table), list(self._insts), dict(self._decisions),
                self._rng.getstate())

    def _set_state(self, state: tuple) -> None:
        self.func, table, insts, decisions, rng = state
        self._table.clear()
        self._table.update(table)
        self._insts[:] = insts
        self._decisions.clear()
        self._decisions.update(decisions)
        self._rng.setstate(rng)

    def fork_seed(self) -> int:
        return self._rng.randrange(2 ** 31)

    def script(self) -> str:
        return self.func.script()

    def _repr_html_(self) -> str:
        return self.func._repr_html_()

    def __str__(self) -> str:
        return self.script()

    def get(self, rv):
        """The value behind a handle: a block or loop name, or an int for an ExprRV."""
        return self._lookup(rv, RV, "get")

    def _lookup(self, rv, cls, prim: str):
        if rv is ROOT or rv is INLINE:
            return rv
        if not isinstance(rv, cls):
            raise ScheduleError(f"{prim}: expected a {cls.__name__}, got {type(rv).__name__} "
                                f"{rv!r}")
        if rv not in self._table:
            raise ScheduleError(f"{prim}: handle {rv!r} does not belong to this schedule (it "
                                "comes from another schedule); get it again from this one")
        val = self._table[rv]
        if val is None:
            raise ScheduleError(f"{prim}: handle {rv!r} refers to a loop that an earlier "
                                "primitive removed (split, fuse, compute_at...); use the new "
                                "handles that primitive returned")
        return val

    def _loop(self, rv, prim: str) -> str:
        return self._lookup(rv, LoopRV, prim)

    def _block(self, rv, prim: str) -> str:
        return self._lookup(rv, BlockRV, prim)

    def _int(self, x, prim: str):
        if isinstance(x, ExprRV):
            return self._lookup(x, ExprRV, prim)
        return x

    def _new(self, cls, value) -> RV:
        rv = cls()
        self._table[rv] = value
        return rv

    def _record(self, kind: str, inputs: list, outputs: list, decision=None) -> None:
        """Append an instruction; alone, for one that leaves the function as it is (a
        query, a sample, a pending kind): pending annotations and kinds stay pending."""
        if decision is not None:
            self._decisions[len(self._insts)] = decision
        self._insts.append(Instruction(kind, tuple(inputs), tuple(outputs)))

    def _commit(self, func: PrimFunc, kind: str, inputs: list, outputs: list, decision=None):
        old, self.func = self.func, func
        self._record(kind, inputs, outputs, decision)
        if func is old:
            return
        # handles die with their loop or block; only names that went away can kill one
        was, now = index_of(old), index_of(func)
        gone_loops = was.loops.keys() - now.loops.keys()
        gone_blocks = was.blocks.keys() - now.blocks.keys()
        if not gone_loops and not gone_blocks:
            return
        table = self._table
        for rv, val in table.items():   # only names (str) go: never None, ROOT or a value
            if type(val) is str and (val in gone_loops and isinstance(rv, LoopRV)
                                     or val in gone_blocks and isinstance(rv, BlockRV)):
                table[rv] = None

    # ------------------------------------------------------------ queries
    # (asked of the function before its pending annotations and kinds: they change no
    # name, buffer or extent)
    def get_block(self, name: str) -> BlockRV:
        """The block called ``name``."""
        find_block(self._func, name, "get_block")   # names: pending edits change none
        rv = self._new(BlockRV, name)
        self._record("get_block", [name], [rv])
        return rv

    def get_loops(self, block: BlockRV) -> list:
        """The loops around ``block``, outermost first."""
        _, path = find_block(self._func, self._block(block, "get_loops"), "get_loops")
        rvs = [self._new(LoopRV, lp.var.name) for lp in loops_of(path)]
        self._record("get_loops", [block], rvs)
        return rvs

    def get_child_blocks(self, parent) -> list:
        """Blocks under a loop, in execution order (none under a block)."""
        if isinstance(parent, LoopRV):
            node, _ = find_loop(self._func, self._loop(parent, "get_child_blocks"))
            names = [r.block.name for r in realizes_in(node.body)]
        else:
            self._block(parent, "get_child_blocks")
            names = []
        rvs = [self._new(BlockRV, n) for n in names]
        self._record("get_child_blocks", [parent], rvs)
        return rvs

    def get_producers(self, block: BlockRV) -> list:
        """Blocks that write what ``block`` reads."""
        r, _ = find_block(self._func, self._block(block, "get_producers"))
        names = []
        for b in r.block.reads():
            names += [w for w in writers(self._func, b.name) if w not in names]
        rvs = [self._new(BlockRV, n) for n in names]
        self._record("get_producers", [block], rvs)
        return rvs

    def get_consumers(self, block: BlockRV) -> list:
        """Blocks that read what ``block`` writes."""
        name = self._block(block, "get_consumers")
        r, _ = find_block(self._func, name)
        names = [c for c in readers(self._func, r.block.body.buffer.name) if c != name]
        rvs = [self._new(BlockRV, n) for n in names]
        self._record("get_consumers", [block], rvs)
        return rvs

    # ------------------------------------------------------------ loops
    def split(self, loop: LoopRV, factors: list) -> list:
        """Split a loop into nested loops with the given extents (one may be None).

        before: ``for i in range(64)``; ``split(i, [None, 8])``
        after:  ``for i_0 in range(8): for i_1 in range(8)`` with ``i = i_0 * 8 + i_1``
        """
        name = self._loop(loop, "split")
        if not isinstance(factors, (list, tuple)):
            raise ScheduleError(f"split: factors must be a list, got {factors!r}")
        values = [self._int(f, "split") for f in factors]
        func, names = loop_prims.split(self.func, name, values)
        rvs = [self._new(LoopRV, n) for n in names]
        self._commit(func, "split", [loop, list(factors)], rvs)
        return rvs

    def fuse(self, *loops: LoopRV) -> LoopRV:
        """Fuse perfectly nested adjacent loops into one.

        before: ``for i in range(4): for j in range(8)``; after: ``for i_j_fused in
        range(32)`` with ``i = f // 8, j = f % 8``.
        """
        loops = _flatten(loops)
        names = [self._loop(lp, "fuse") for lp in loops]
        func, new = loop_prims.fuse(self.func, names)
        rv = self._new(LoopRV, new)
        self._commit(func, "fuse", list(loops), [rv])
        return rv

    def reorder(self, *loops: LoopRV) -> None:
        """Put loops of one perfectly nested chain in the given order (outermost first)."""
        loops = _flatten(loops)
        names = [self._loop(lp, "reorder") for lp in loops]
        self._commit(loop_prims.reorder(self.func, names), "reorder", list(loops), [])

    @_atomic
    def tile(self, loops: list, factors: list) -> list:
        """Split each loop by one factor and reorder: outer loops first, then the inner.

        A convenience over split + reorder (those are what the trace records); when a
        step fails, none of them is kept."""
        if not isinstance(loops, (list, tuple)) or not isinstance(factors, (list, tuple)):
            raise ScheduleError(f"tile: loops and factors must be lists, got {loops!r} and "
                                f"{factors!r}")
        if len(loops) != len(factors):
            raise ScheduleError(f"tile: {len(loops)} loops but {len(factors)} factors")
        outer, inner = [], []
        for lp, f in zip(loops, factors):
            o, i = self.split(lp, [None, f])
            outer.append(o)
            inner.append(i)
        self.reorder(*outer, *inner)
        return outer + inner

    def parallel(self, loop: LoopRV) -> None:
        """Run the loop's iterations on all cores (spatial loops only)."""
        self._set_kind(loop, "parallel", "parallel")

    def vectorize(self, loop: LoopRV) -> None:
        """Run the loop as SIMD lanes (spatial loops only)."""
        self._set_kind(loop, "vectorized", "vectorize")

    def unroll(self, loop: LoopRV) -> None:
        """Unroll the loop completely in the generated code."""
        self._set_kind(loop, "unrolled", "unroll")

    def _set_kind(self, loop: LoopRV, kind: str, prim: str) -> None:
        """Check as ``loop_prims`` does, then change the loop's kind with the pending
        annotations (no loop or block goes, so no handle dies)."""
        name = self._loop(loop, prim)
        where = ("loop", name)
        pending = self._pending or {}
        changes = pending.get(where, {})
        node, _ = find_loop(self._func, name, prim)
        now = (changes.get("kind", node.kind), changes.get("thread", node.thread))
        loop_prims.check_kind(self._func, name, kind, now)
        self._pending = {**pending, where: {**changes, "kind": kind, "thread": None}}
        self._record(prim, [loop], [])

    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        """Bind the loop to a GPU thread axis (blockIdx.x, threadIdx.x, vthread.x...)."""
        name = self._loop(loop, "bind")
        self._commit(loop_prims.bind(self.func, name, thread_axis), "bind",
                     [loop, thread_axis], [])

    # ------------------------------------------------------------ blocks
    def cache_read(self, block: BlockRV, read_buffer_index: int, storage_scope: str) -> BlockRV:
        """Make ``block`` read buffer number ``read_buffer_index`` from a copy in
        ``storage_scope``; returns the copy block (place it with compute_at)."""
        name = self._block(block, "cache_read")
        func, new = cache_prims.cache_read(self.func, name, read_buffer_index, storage_scope)
        rv = self._new(BlockRV, new)
        self._commit(func, "cache_read", [block, read_buffer_index, storage_scope], [rv])
        return rv

    def cache_write(self, block: BlockRV, write_buffer_index: int, storage_scope: str) -> BlockRV:
        """Make ``block`` write into a buffer in ``storage_scope`` copied back by the
        returned block (place it with reverse_compute_at)."""
        name = self._block(block, "cache_write")
        func, new = cache_prims.cache_write(self.func, name, write_buffer_index, storage_scope)
        rv = self._new(BlockRV, new)
        self._commit(func, "cache_write", [block, write_buffer_index, storage_scope], [rv])
        return rv

    def transform_layout(self, block: BlockRV, buffer, axes: list, factors=None) -> None:
        """Store buffer ``buffer`` (``("read", i)`` or ``("write", 0)``) of ``block`` in a new
        layout: with ``factors`` (one entry per dimension: None keeps it whole, f splits it
        into ``d // f`` and ``d % f``, an int or a sampled ExprRV) first blocked, then
        permuted: new dimension n is (split) dimension ``axes[n]``. Only buffers the
        function allocates (cache_read / cache_write copies) can change; the copy that
        fills the layout runs inside the function. ``B[k, n]`` with ``factors=[None, 16]``,
        ``axes=[1, 0, 2]`` is the packed GEMM panel ``B_p[n // 16, k, n % 16]``."""
        name = self._block(block, "transform_layout")
        which = tuple(buffer) if isinstance(buffer, (list, tuple)) else buffer
        values = None if factors is None else \
            [self._int(f, "transform_layout") for f in factors] \
            if isinstance(factors, (list, tuple)) else factors
        func = layout_prims.transform_layout(self.func, name, which, axes, values)
        inputs = [block, list(which), list(axes)]
        if factors is not None:     # a pure permutation keeps its three-input record
            inputs.append(list(factors))
        self._commit(func, "transform_layout", inputs, [])

    def compute_at(self, block: BlockRV, loop: LoopRV) -> None:
        """Compute producer ``block`` under ``loop``, only the region its consumers need
        per iteration. ROOT leaves it in place; INLINE inlines it."""
        name = self._block(block, "compute_at")
        target = self._loop(loop, "compute_at")
        if target is ROOT:
            func = self.func
        elif target is INLINE:
            func = block_prims.compute_inline(self.func, name)
        else:
            func = block_prims.compute_at(self.func, name, target)
        self._commit(func, "compute_at", [block, loop], [])

    def reverse_compute_at(self, block: BlockRV, loop: LoopRV) -> None:
        """Compute consumer ``block`` under ``loop``, right after its producers there."""
        name = self._block(block, "reverse_compute_at")
        target = self._loop(loop, "reverse_compute_at")
        if target is ROOT or target is INLINE:
            raise ScheduleError("reverse_compute_at: give a loop, not ROOT or INLINE")
        self._commit(block_prims.reverse_compute_at(self.func, name, target),
                     "reverse_compute_at", [block, loop], [])

    def compute_inline(self, block: BlockRV) -> None:
        """Inline an injective block into its consumers."""
        name = self._block(block, "compute_inline")
        self._commit(block_prims.compute_inline(self.func, name), "compute_inline", [block], [])

    def reverse_compute_inline(self, block: BlockRV) -> None:
        """Inline an injective consumer into its producer's store."""
        name = self._block(block, "reverse_compute_inline")
        self._commit(block_prims.reverse_compute_inline(self.func, name),
                     "reverse_compute_inline", [block], [])

    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Move the init of a reduction into its own block before ``loop``."""
        name = self._block(block, "decompose_reduction")
        target = self._loop(loop, "decompose_reduction")
        func, new = reduction_prims.decompose_reduction(self.func, name, target)
        rv = self._new(BlockRV, new)
        self._commit(func, "decompose_reduction", [block, loop], [rv])
        return rv

    def rfactor(self, loop: LoopRV, factor_axis: int) -> BlockRV:
        """Factor a reduction loop into a new dimension; returns the rfactor block."""
        name = self._loop(loop, "rfactor")
        func, new = reduction_prims.rfactor(self.func, name, factor_axis)
        rv = self._new(BlockRV, new)
        self._commit(func, "rfactor", [loop, factor_axis], [rv])
        return rv

    def annotate(self, target, ann_key: str, ann_val) -> None:
        """Attach ``ann_key = ann_val`` to a loop or block (an ExprRV value is resolved)."""
        if not isinstance(ann_key, str) or not ann_key:
            raise ScheduleError(f"annotate: key must be a non-empty string, got {ann_key!r}")
        value = self._int(ann_val, "annotate")
        if not isinstance(value, (int, float, str)) or (isinstance(value, float)
                                                         and not math.isfinite(value)):
            raise ScheduleError(f"annotate: value must be an int, finite float, string or "
                                f"ExprRV, got {ann_val!r}")
        self._set_ann(target, ann_key, value, "annotate")
        self._insts.append(Instruction("annotate", (target, ann_key, ann_val), ()))

    def unannotate(self, target, ann_key: str) -> None:
        """Remove annotation ``ann_key`` from a loop or block."""
        self._set_ann(target, ann_key, None, "unannotate")
        self._insts.append(Instruction("unannotate", (target, ann_key), ()))

    def _set_ann(self, target, key, value, prim) -> None:
        """Set (``value`` None: remove) one annotation, pending until ``func`` is asked
        for; annotations change no loop or block, so no handle dies."""
        loop = isinstance(target, LoopRV)
        name = self._loop(target, prim) if loop else self._block(target, prim)
        where = ("loop" if loop else "block", name)
        pending = self._pending or {}
        changes = pending.get(where, {})
        items = changes.get("annotations")
        if items is None:          # the loops and blocks are those of the pending func
            items = (find_loop(self._func, name, prim)[0].annotations if loop
                     else find_block(self._func, name, prim)[0].block.annotations)
        anns = dict(items)
        if value is None:
            if key not in anns:
                raise ScheduleError(f"unannotate: {name!r} has no annotation {key!r}")
            anns.pop(key)
        else:
            anns[key] = value
        # new dicts, never changed in place: copies of the schedule may share the old
        items = tuple(sorted(anns.items()))
        self._pending = {**pending, where: {**changes, "annotations": items}}

    # ------------------------------------------------------------ sampling
    def sample_perfect_tile(self, loop: LoopRV, n: int, max_innermost_factor: int = 64,
                            decision=None) -> list:
        """Sample n factors whose product is the loop's extent (innermost bounded)."""
        name = self._loop(loop, "sample_perfect_tile")
        node, _ = find_loop(self._func, name)
        d = sampling.sample_perfect_tile(node.extent, n, max_innermost_factor, self._rng,
                                         decision)
        rvs = [self._new(ExprRV, x) for x in d]
        self._record("sample_perfect_tile", [loop, n, max_innermost_factor], rvs, d)
        return rvs

    def sample_categorical(self, candidates: list, probs: list, decision=None) -> ExprRV:
        """Sample one of ``candidates`` (ints) with probabilities ``probs``."""
        if (not isinstance(candidates, (list, tuple))
                or not isinstance(probs, (list, tuple, np.ndarray))
                or not all(isinstance(c, int) and not isinstance(c, bool) for c in candidates)):
            raise ScheduleError(f"sample_categorical: candidates must be a list of ints and "
                                f"probs a list of numbers, got {candidates!r} and {probs!r}")
        sampling.check_probs(probs)
        probs = [p if type(p) in (int, float) else float(p) for p in probs]   # numpy: JSON
        d = sampling.sample_categorical(list(candidates), probs, self._rng, decision)
        rv = self._new(ExprRV, candidates[d])
        self._record("sample_categorical", [list(candidates), probs], [rv], d)
        return rv

    def compute_location_options(self, block_name: str, only=None) -> list:
        """Legal locations for a block: -2 inline, -1 root, k = k-th loop of its consumer.
        With ``only`` (a location), just that one is tried: ``[only]`` when legal. Each is
        checked as its primitive would check it, without building the moved nest."""
        options = []
        if (only is None or only == -2) and block_prims.can_compute_inline(self.func, block_name):
            options.append(-2)
        if only is None or only == -1:
            options.append(-1)
        r, _ = find_block(self.func, block_name)
        consumers = [c for c in readers(self.func, r.block.body.buffer.name) if c != block_name]
        if consumers and (only is None or only >= 0):
            _, cpath = find_block(self.func, consumers[0])
            for k, lp in enumerate(loops_of(cpath)):
                if only is not None and k != only:
                    continue
                if block_prims.can_compute_at(self.func, block_name, lp.var.name):
                    options.append(k)
        return options

    def sample_compute_location(self, block: BlockRV, decision=None) -> LoopRV:
        """Sample where to compute a block: ROOT, INLINE, or a loop of its consumer.
        A given decision is checked alone."""
        name = self._block(block, "sample_compute_location")
        options = None
        if isinstance(decision, int) and not isinstance(decision, bool):
            options = self.compute_location_options(name, only=decision)
        if not options:
            options = self.compute_location_options(name)   # all of them: for the error
        d = sampling.sample_location(options, self._rng, decision)
        if d < 0:
            rv = self._new(LoopRV, ROOT if d == -1 else INLINE)
        else:
            r, _ = find_block(self.func, name)
            cons = [c for c in readers(self.func, r.block.body.buffer.name) if c != name]
            _, cpath = find_block(self.func, cons[0])
            rv = self._new(LoopRV, loops_of(cpath)[d].var.name)
        self._commit(self.func, "sample_compute_location", [block], [rv], d)
        return rv


def _flatten(loops) -> list:
    out = []
    for x in loops:
        out.extend(x if isinstance(x, (list, tuple)) else [x])
    return out
