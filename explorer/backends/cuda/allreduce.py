"""Cross-thread reductions: what the CUDA generator emits for a reduction loop bound to
threads (a loop marked ``cross_thread_reduction`` by ``Schedule.bind``).

In the lowered IR the threads of such a loop all update one accumulator
(``B[i] = B[i] + A[i, k_1 + k_0*64]`` under ``for k_0: for k_1 in threadIdx.x``); the
interpreter runs them one after another (``interp._allreduced``). On the GPU every
thread keeps a partial result in a register across the *reduction nest* (the
thread loop and the serial loops around it, perfectly nested, whose variables do not
index the accumulator), the threads then combine their partials (warp shuffles within
a warp, a shared-memory step across warps or for extents that are not powers of two),
and one thread writes ``B[i] = B[i] + total``, or ``B[i] = init + total`` where the
reduction's init store sat in the nest at its first iteration.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import BuildError
from ...ir.arith import simplify
from ...ir.expr import (Add, BufferLoad, Expr, FloatImm, IntImm, Max, Min, Mul, all_of, const,
                        conjuncts, is_const)
from ...ir.functor import collect_loads, expr_vars, substitute, walk_stmt
from ...ir.stmt import BufferStore, For, IfThenElse
from ...schedule.loop_prims import CROSS_THREAD_REDUCTION
from ..barriers import THREAD_TAGS
from .cexpr import RawName, cname, ctype, subst_all

COMBINERS = (Add, Mul, Max, Min)


@dataclass
class Accumulator:
    """One buffer element the threads of a reduction nest combine."""
    store: BufferStore          # one accumulating store (the others are equal to it)
    combiner: type              # Add, Mul, Max or Min
    partial: str                # the register holding this thread's partial result
    init_value: Expr | None = None
    init_cond: Expr | None = None   # does the nest's first iteration run the init?
    guard: Expr = const(True)       # the update's conditions on spatial variables only:
                                    # where it is false no thread writes the element

    @property
    def buffer(self):
        return self.store.buffer

    @property
    def indices(self):
        return self.store.indices

    def identity(self) -> Expr:
        dtype = self.buffer.dtype
        if self.combiner in (Add, Mul):
            return const(1 if self.combiner is Mul else 0, dtype)
        big = float("inf") if dtype in ("float32", "float64") else 2 ** 31 - 1
        if self.combiner is Max:
            return FloatImm(-big, dtype) if dtype != "int32" else IntImm(-big, dtype)
        return FloatImm(big, dtype) if dtype != "int32" else IntImm(big, dtype)

    def combine(self, a: Expr, b: Expr) -> Expr:
        return self.combiner(a, b)


@dataclass
class Reduction:
    loop: For                   # the thread-bound reduction loop
    root: For                   # outermost loop of the reduction nest
    nest_vars: set
    accs: list                  # of Accumulator
    init_ids: set               # ids of the init stores folded into the final write


def _combiner(st: BufferStore):
    v = st.value
    if type(v) not in COMBINERS:
        return None
    for mine, other in ((v.a, v.b), (v.b, v.a)):
        if (isinstance(mine, BufferLoad) and mine.buffer == st.buffer
                and mine.indices == st.indices
                and not any(ld.buffer == st.buffer for ld in collect_loads(other))):
            return type(v)
    return None


def plan_reductions(root: For) -> dict:
    """id(nest root) -> Reduction for every cross-thread reduction loop under ``root``."""
    out: dict = {}
    for node, path in walk_stmt(root):
        if (isinstance(node, For) and node.kind == "thread" and node.thread in THREAD_TAGS
                and node.annotation(CROSS_THREAD_REDUCTION)):
            red = _plan(node, path)
            if red is not None:
                out[id(red.root)] = red
    return out


def _plan(loop: For, path: tuple):
    stores = [(n, p) for n, p in walk_stmt(loop.body) if isinstance(n, BufferStore)]
    acc_stores = [(n, p) for n, p in stores if _combiner(n) is not None]
    if not acc_stores:
        return None
    names = {n.buffer.name for n, _ in acc_stores}
    index_vars = set().union(*(expr_vars(i) for n, _ in acc_stores for i in n.indices))
    where = f"cross-thread reduction over loop {loop.var.name!r} ({loop.thread})"
    if loop.var.name in index_vars:
        raise BuildError(f"{where}: the accumulator's index uses the thread loop's variable; "
                         "bind a reduction loop, not a spatial one")
    if any(p.kind == "thread" and p.thread == loop.thread for p in path):
        raise BuildError(f"{where}: it is nested in another {loop.thread} loop; bind the "
                         "reduction's inner loop to a thread axis of its own")
    root, nest = loop, [loop]
    for parent in reversed(path):
        if not (isinstance(parent, For) and parent.body is root and parent.extent >= 1
                and parent.kind in ("serial", "unrolled")
                and parent.var.name not in index_vars):
            break
        root = parent
        nest.insert(0, parent)
    nest_vars = {lp.var.name for lp in nest}
    inner_vars = set()
    for n, _ in walk_stmt(loop.body):
        if isinstance(n, For):
            inner_vars.add(n.var.name)
    if index_vars & inner_vars:
        raise BuildError(f"{where}: the accumulator's element changes inside the reduction "
                         "loop; reorder the spatial loops outside the reduction loops")
    accs, init_ids = {}, set()
    for n, p in stores:
        if n.buffer.name not in names:
            continue
        comb = _combiner(n)
        if comb is None:
            init_ids.add(id(n))
            continue
        acc = accs.get(n.buffer.name)
        if acc is None:
            spatial = [c for x in p if isinstance(x, IfThenElse) for c in conjuncts(x.cond)
                       if not expr_vars(c) & (nest_vars | inner_vars)]
            accs[n.buffer.name] = Accumulator(n, comb, f"{cname(n.buffer.name)}_red",
                                              guard=all_of(*spatial))
        elif acc.combiner is not comb or acc.indices != n.indices:
            raise BuildError(f"{where}: {n.buffer.name} is accumulated two ways; one "
                             "reduction per buffer")
    _check_reads(loop, names, where)
    zero = {v: const(0) for v in nest_vars | inner_vars}
    for n, p in stores:
        if id(n) not in init_ids:
            continue
        acc = accs[n.buffer.name]
        if expr_vars(n.value) & (nest_vars | inner_vars) or n.indices != acc.indices:
            raise BuildError(f"{where}: the init of {n.buffer.name} depends on the reduction "
                             "loops; decompose_reduction the block first")
        # the final write runs under the update's guard already: leave its terms out
        known = set(conjuncts(acc.guard))
        conds = [c for x in p if isinstance(x, IfThenElse) for c in conjuncts(x.cond)
                 if c not in known]
        acc.init_value = n.value
        acc.init_cond = simplify(substitute(all_of(*conds), zero))
    return Reduction(loop, root, nest_vars, list(accs.values()), init_ids)


def _check_reads(loop: For, names: set, where: str) -> None:
    for n, _ in walk_stmt(loop.body):
        exprs = []
        if isinstance(n, BufferStore):
            exprs = list(n.indices) + ([n.value] if _combiner(n) is None else
                                       [n.value.b if _is_self(n, n.value.a) else n.value.a])
        elif isinstance(n, IfThenElse):
            exprs = [n.cond]
        for e in exprs:
            if any(ld.buffer.name in names for ld in collect_loads(e)):
                raise BuildError(f"{where}: the accumulator is read inside the reduction "
                                 "other than by its own update; the threads only see their "
                                 "partial results there")


def _is_self(st: BufferStore, e: Expr) -> bool:
    return isinstance(e, BufferLoad) and e.buffer == st.buffer and e.indices == st.indices


def final_value(acc: Accumulator, total: Expr) -> Expr:
    """What the writing thread stores after the threads combined ``total``."""
    current = BufferLoad(acc.buffer, acc.indices)
    if acc.init_value is None or is_const(acc.init_cond, 0):
        return acc.combine(current, total)
    with_init = total if acc.init_value == acc.identity() else acc.combine(acc.init_value,
                                                                           total)
    if is_const(acc.init_cond, 1):
        return with_init
    from ...ir.expr import Select
    return Select(acc.init_cond, with_init, acc.combine(current, total))


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class AllreduceEmitter:
    """Mixed into the kernel generator (``codegen._KernelGen``): a reduction nest, then
    the threads combining their partials, then the final write."""

    def _reduction(self, red) -> None:
        loop = red.loop
        if not self.uniform:
            raise BuildError(
                f"cross-thread reduction over loop {loop.var.name!r} ({loop.thread}) sits under "
                "a condition that depends on the thread, but every thread of the block must "
                "take part in combining the partial results: move the guard inside the "
                "reduction loop or bind the guarded loop to blockIdx")
        self.open(f"{{  // cross-thread reduction over {loop.var.name} ({loop.thread}, "
                  f"{self.launch.extents[loop.thread]} threads)")
        for acc in red.accs:
            self.line(f"{ctype(acc.buffer.dtype)} {acc.partial} = {self.cx(acc.identity())};")
        self.red = {a.buffer.name: a for a in red.accs}
        self.red_init = red.init_ids
        self.stmt_plain(red.root)
        self.red, self.red_init = {}, set()
        tid = self._linear_tid()
        self.line(f"const int red_tid = {tid};")
        for acc in red.accs:
            self._combine_threads(acc, loop.thread)
        tag = loop.thread
        for acc in red.accs:
            total = RawName(acc.partial, acc.buffer.dtype)
            store = f"{self.access(acc.buffer, subst_all(acc.indices, self.subst))} = " \
                    f"{self.e(final_value(acc, total))};"
            conds = [] if acc.buffer.scope == "local" else [f"{tag} == 0"]
            guard = simplify(substitute(acc.guard, self.subst), self.ranges)
            if not is_const(guard, 1):
                conds.append(self.cx.wrap(guard, 6))      # && binds tighter than ||
            if conds:
                self.open(f"if ({' && '.join(conds)}) {{")
                self.line(store)
                self.close()
            else:
                self.line(store)
        self.close()

    def stmt_plain(self, s) -> None:
        """``stmt`` without starting a reduction at ``s`` (its nest is being emitted)."""
        if isinstance(s, For):
            self._for(s)
        else:
            self.stmt(s)

    def _linear_tid(self) -> str:
        bx, by, _ = self.launch.block
        parts = ["threadIdx.x"]
        if self.launch.extents.get("threadIdx.y", 1) > 1:
            parts.append(f"{bx} * threadIdx.y")
        if self.launch.extents.get("threadIdx.z", 1) > 1:
            parts.append(f"{bx * by} * threadIdx.z")
        return " + ".join(parts)

    def _op(self, acc, a: str, b: str) -> str:
        dt = acc.buffer.dtype
        return self.cx(acc.combine(RawName(a, dt), RawName(b, dt)))

    def _combine_threads(self, acc, tag: str) -> None:
        n = self.launch.extents[tag]
        if n == 1:
            return
        p, ct = acc.partial, ctype(acc.buffer.dtype)
        threads = math.prod(self.launch.block)
        if tag == "threadIdx.x" and _pow2(n) and n <= 32:
            mask = "0xffffffffu" if n == 32 else \
                f"({hex((1 << n) - 1)}u << (red_tid & {32 - n}))"
            self.line(f"const unsigned {p}_mask = {mask};  // this thread's group of {n} lanes")
            self._shuffle(acc, f"{p}_mask", n // 2)
        elif tag == "threadIdx.x" and _pow2(n):
            per = n // 32
            self._shuffle(acc, "0xffffffffu", 16)
            self.line(f"__shared__ {ct} {p}_warp[{threads // 32}];")
            self.line(f"if ((red_tid & 31) == 0) {p}_warp[red_tid >> 5] = {p};")
            self.line("__syncthreads();")
            self.line(f"{p} = {p}_warp[red_tid / {n} * {per}];")
            self.line("#pragma unroll")
            self.line(f"for (int w = 1; w < {per}; ++w) "
                      f"{p} = {self._op(acc, p, f'{p}_warp[red_tid / {n} * {per} + w]')};")
            self.line("__syncthreads();")
            self.static_bytes += threads // 32 * np.dtype(acc.buffer.dtype).itemsize
        else:
            stride = {"threadIdx.x": 1, "threadIdx.y": self.launch.block[0],
                      "threadIdx.z": self.launch.block[0] * self.launch.block[1]}[tag]
            top = 1 << (n - 1).bit_length()
            self.line(f"__shared__ {ct} {p}_buf[{threads}];")
            self.line(f"{p}_buf[red_tid] = {p};")
            self.line("__syncthreads();")
            self.line("#pragma unroll")
            self.open(f"for (int off = {top // 2}; off > 0; off >>= 1) {{")
            self.open(f"if ({tag} < off && {tag} + off < {n}) {{")
            far = f"{p}_buf[red_tid + off" + (f" * {stride}]" if stride > 1 else "]")
            self.line(f"{p}_buf[red_tid] = {self._op(acc, f'{p}_buf[red_tid]', far)};")
            self.close()
            self.line("__syncthreads();")
            self.close()
            self.line(f"{p} = {p}_buf[red_tid - {tag}" + (f" * {stride}];" if stride > 1 else "];"))
            self.line("__syncthreads();")
            self.static_bytes += threads * np.dtype(acc.buffer.dtype).itemsize

    def _shuffle(self, acc, mask: str, start: int) -> None:
        p = acc.partial
        self.line("#pragma unroll")
        self.line(f"for (int off = {start}; off > 0; off >>= 1) "
                  f"{p} = {self._op(acc, p, f'__shfl_xor_sync({mask}, {p}, off)')};")


