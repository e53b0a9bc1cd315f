"""Questions the rules and postprocessors ask about blocks and loops.

Pure functions of a ``PrimFunc`` and block/loop names (what the handles of a
``Schedule`` resolve to): the iteration type of a loop, whether a block needs
multi-level tiling or rfactor, the strides of its accesses. They mirror the
analyses MetaSchedule's rules rely on (``GetLoopIterType``,
``NeedsMultiLevelTiling``, ``NeedsRFactorOrCrossThreadReduction``...).
"""
from __future__ import annotations

from ..ir.arith import linear_coeff  # noqa: F401 (re-exported for the rules)
from ..ir.arith import form_coeff, simplified_form, simplify

import math

from ..ir.expr import Add, Call, IntImm, Mul, Select, Sub, Var
from ..ir.functor import collect_loads, expr_vars, walk_expr
from ..ir.index import cached, index_of
from ..ir.stmt import BlockRealize, For, SeqStmt
from ..schedule.tree import find_block, find_loop, loops_of, readers

# Annotation keys, spelled as in MetaSchedule so that traces read the same.
TILING_STRUCTURE = "meta_schedule.tiling_structure"
PARALLEL = "meta_schedule.parallel"
VECTORIZE = "meta_schedule.vectorize"
UNROLL_EXPLICIT = "meta_schedule.unroll_explicit"
UNROLL_IMPLICIT = "meta_schedule.unroll_implicit"
RANDOM_COMPUTE_PRODUCER = "meta_schedule.random_compute_producer"
COOPERATIVE_FETCH = "meta_schedule.cooperative_fetch"
THREAD_EXTENT_LOW = "meta_schedule.thread_extent_low_inclusive"
THREAD_EXTENT_HIGH = "meta_schedule.thread_extent_high_inclusive"
AUTO_UNROLL_MAX_STEP = "pragma_auto_unroll_max_step"
UNROLL_EXPLICIT_PRAGMA = "pragma_unroll_explicit"


# ------------------------------------------------------------------ blocks

def realize_of(func, block: str) -> tuple:
    """(BlockRealize, loops around it, outermost first)."""
    r, path = find_block(func, block)
    return r, loops_of(path)


def block_annotations(func, block: str) -> dict:
    return dict(find_block(func, block)[0].block.annotations)


def is_output(func, block: str) -> bool:
    """True when the block writes a parameter of the function."""
    r, _ = find_block(func, block)
    return r.block.body.buffer in func.params


def is_trivial_binding(func, block: str) -> bool:
    """Every iteration variable is bound to its own loop, in order, and nothing else."""
    r, loops = realize_of(func, block)
    if len(loops) != len(r.block.iter_vars):
        return False
    return all(isinstance(v, Var) and v.name == lp.var.name and lp.extent == iv.extent
               for v, lp, iv in zip(r.iter_values, loops, r.block.iter_vars))


def has_if_then_else(func, block: str) -> bool:
    b = find_block(func, block)[0].block
    return any(isinstance(x, Select) for x in walk_expr(b.body.value))


def has_op(func, block: str, ops) -> bool:
    b = find_block(func, block)[0].block
    return any(isinstance(x, Call) and x.op in ops for x in walk_expr(b.body.value))


def consumers(func, block: str) -> list:
    buf = find_block(func, block)[0].block.body.buffer.name
    return [c for c in readers(func, buf) if c != block]


def spatial_reduce_extents(func, block: str) -> tuple:
    """(product of the spatial loop extents, product of the reduction loop extents)."""
    _, loops = realize_of(func, block)
    space = red = 1
    for lp in loops:
        kind = loop_iter_type(func, lp.var.name)
        if kind == "S":
            space *= lp.extent
        elif kind == "R":
            red *= lp.extent
    return space, red


def needs_multi_level_tiling(func, block: str) -> bool:
    """A reduction block, trivially bound, some of whose inputs miss a spatial variable
    (so a tile of the output reuses them): MetaSchedule's condition for tiling."""
    r, _ = find_block(func, block)
    b = r.block
    if (not b.is_reduction or TILING_STRUCTURE in dict(b.annotations)
            or not is_trivial_binding(func, block) or not b.reads()):
        return False
    spatial = [iv.var.name for iv in b.iter_vars if iv.kind == "S" and iv.extent > 1]
    unused = 0
    for buf in b.reads():
        used = set()
        for idx in b.read_indices(buf):
            for e in idx:
                used |= expr_vars(e)
        unused += sum(1 for v in spatial if v not in used)
    return unused >= 1


def is_single_nest(func, block: str) -> bool:
    """The loops around ``block`` are perfectly nested and hold nothing else."""
    r, loops = realize_of(func, block)
    for outer, inner in zip(loops, loops[1:] + [None]):
        body = outer.body
        if inner is None:
            if not (isinstance(body, BlockRealize) and body.block.name == block):
                return False
        elif not (isinstance(body, For) and body.var.name == inner.var.name):
            return False
    return True


def needs_rfactor(func, block: str, max_parallel_extent: int, max_parallel_basic: int) -> bool:
    """MetaSchedule's ``NeedsRFactorOrCrossThreadReduction``: too little spatial parallelism
    for the size of the reduction."""
    r, loops = realize_of(func, block)
    b = r.block
    if (not b.is_reduction or not is_trivial_binding(func, block)
            or TILING_STRUCTURE in dict(b.annotations) or not loops):
        return False
    kinds = [loop_iter_type(func, lp.var.name) for lp in loops]
    if "O" in kinds or "R" not in kinds or not is_single_nest(func, block):
        return False
    space, red = spatial_reduce_extents(func, block)
    if needs_multi_level_tiling(func, block):
        return not (space >= red or space > max_parallel_extent)
    return red > 1 and red > max_parallel_basic


# ------------------------------------------------------------------ loops

def loop_iter_type(func, loop: str) -> str:
    """"S" if the loop binds only spatial iteration variables of the blocks beneath (or
    none), "R" if only reduction ones, "O" (opaque) if both."""
    find_loop(func, loop)
    kinds = cached(func, "_iter_kinds", _iter_kinds).get(loop, ())
    if len(kinds) > 1:
        return "O"
    return "R" if kinds == {"R"} else "S"


def _iter_kinds(func) -> dict:
    """Loop name -> kinds of the iteration variables it binds in the blocks beneath it
    (every loop's answer in one pass over the blocks)."""
    out: dict = {}
    for r, path in index_of(func).blocks.values():
        around = {lp.var.name for lp in path if isinstance(lp, For)}
        for iv, val in zip(r.block.iter_vars, r.iter_values):
            for name in expr_vars(val) & around:
                out.setdefault(name, set()).add(iv.kind)
    return out


def is_single_stmt(loop: For) -> bool:
    return not isinstance(loop.body, SeqStmt)


def is_free(loop: For) -> bool:
    """A serial loop without annotations (MetaSchedule's ``!HasAnnOrBinding``)."""
    return loop.kind == "serial" and not loop.annotations


def loop_node(sch, loop_rv) -> For:
    return find_loop(sch.func, sch.get(loop_rv))[0]


def thread_extent(path, prefix: str = "threadIdx") -> int:
    """Product of the extents of the loops in ``path`` bound to ``prefix`` axes (one per axis)."""
    seen = {}
    for lp in path:
        if isinstance(lp, For) and lp.kind == "thread" and lp.thread.startswith(prefix):
            seen[lp.thread] = lp.extent
    return math.prod(seen.values())


# ------------------------------------------------------------------ strides

def access_stride(buf_shape, indices, var: str, coeff=linear_coeff):
    """Stride in elements of ``var`` in an access (MetaSchedule: the innermost dimension
    that uses it decides); 0 when unused, None when not linear. ``coeff(index, var)``
    reads a coefficient (``form_coeff`` for indices given as linear forms)."""
    stride = 1
    for dim, idx in zip(reversed(buf_shape), reversed(indices)):
        c = coeff(idx, var)
        if c is None:
            return None
        if c != 0:
            return c * stride
        stride *= dim
    return 0


def vectorizable_depth(func, block: str) -> int:
    """How many innermost loops of ``block`` can be fused into one contiguous vector
    (MetaSchedule's ``max_fusible`` in ``AdjustParallelVectorize``)."""
    from ..ir.functor import substitute
    r, loops = realize_of(func, block)
    b = r.block
    bind = {iv.var.name: v for iv, v in zip(b.iter_vars, r.iter_values)}
    accesses = [(ld.buffer.shape, ld.indices) for ld in collect_loads(b.body.value)]
    accesses.append((b.body.buffer.shape, b.body.indices))
    best = len(loops)
    extents = [lp.extent for lp in loops]
    ranges = {lp.var.name: (0, lp.extent - 1) for lp in loops}   # decide // and % of
    for shape, idx in accesses:                                     # blocked layouts
        # an index is simplified when a stride first needs it (strides look at the
        # innermost dimensions first and stop at the first that uses the loop), to its
        # linear form: the coefficients are read from its terms
        idx = _Lazy(lambda d, idx=idx: _simplified(substitute(idx[d], bind), ranges), len(idx))
        strides = _Lazy(lambda n, shape=shape, idx=idx: access_stride(
            shape, idx, loops[n].var.name, _coeff))
        best = min(best, _fusible(strides, extents))
    return best


def _simplified(e, ranges: dict):
    """``simplify(e, ranges)`` as its linear form where it has one, else the expression."""
    form = simplified_form(e, ranges)
    return simplify(e, ranges) if form is None else form


def _coeff(idx, var: str):
    return form_coeff(idx, var) if type(idx) is tuple else linear_coeff(idx, var)


class _Lazy:
    """seq[n] computed on first use (the scan stops at the first loop that breaks);
    ``size``: a sequence of that length (``reversed`` walks it from the end)."""

    def __init__(self, fn, size: int = 0):
        self.fn, self.memo, self.size = fn, {}, size

    def __getitem__(self, n):
        if n not in self.memo:
            self.memo[n] = self.fn(n)
        return self.memo[n]

    def __len__(self) -> int:
        return self.size


def _fusible(strides, extents: list) -> int:
    fusible, prev = 0, -1
    for i in range(len(extents) - 1, -1, -1):
        s = strides[i]
        if s == 0:
            fusible += 1
        elif s is None:
            break
        elif prev == -1:
            if s != 1 and fusible != 0:
                break
            fusible += 1
            prev = i
        elif s == strides[prev] * extents[prev]:
            fusible += 1
            prev = i
        else:
            break
    return fusible
