"""One feature row per store: the groups of :mod:`explorer.features.names`, raw values.

``store_rows`` walks the stores of a lowered function in program order and
returns the raw (not yet log-scaled) rows. Region bookkeeping shared between
stores (what earlier stores touched under each loop, for serial reuse) lives in
one ``touched`` map per function, as in MetaSchedule.
"""
from __future__ import annotations

import math

from ..ir.expr import (EQ, FLOAT_DTYPES, LE, LT, NE, Add, And, Call, Div, FloorDiv, FloorMod, Max,
                       Min, Mul, Not, Or, Select, Sub)
from . import access as acc_mod
from .access import DTYPE_BYTES, gather, parse_affine
from .names import ARITH, BUFFERS_PER_STORE, BUFFER_FIELDS, CURVE_SAMPLES, GPU_TAGS, POSITIONS
from .nest import collect
from .target import Machine, target_features

_ARITH_INDEX = {name: k for k, name in enumerate(ARITH)}


# ------------------------------------------------------------------ group 1

_KIND = {Add: "add_sub", Sub: "add_sub", Mul: "mul", Div: "div_mod", FloorDiv: "div_mod",
         FloorMod: "div_mod", Min: "cmp", Max: "cmp", LT: "cmp", LE: "cmp", EQ: "cmp",
         NE: "cmp", And: "bool_op", Or: "bool_op", Not: "bool_op", Select: "select_op",
         Call: "math_func"}


def _op_name(e) -> str | None:
    kind = _KIND.get(type(e))
    if kind is None or kind in ("bool_op", "select_op"):
        return kind
    dtype = e.dtype if kind == "math_func" else e.a.dtype
    prefix = "float_" if dtype in FLOAT_DTYPES else "int_"
    if kind == "add_sub" and (type(e.a) is Mul or type(e.b) is Mul):
        return prefix + "mad"
    return prefix + kind


def arith_counts(all_nodes: list) -> list:
    """Operations by kind among ``all_nodes`` (pre-order); a multiply feeding an add
    counts as one multiply-add (MetaSchedule leaves ``mad`` at 0, having no such node)."""
    counts = [0] * len(ARITH)
    fused: set = set()
    for node in all_nodes:
        if type(node) not in _KIND:     # a variable, constant or load: no operation
            continue
        name = _op_name(node)
        if name is None or id(node) in fused:
            continue
        if name.endswith("_mad"):
            fused.add(id(node.a) if isinstance(node.a, Mul) else id(node.b))
        counts[_ARITH_INDEX[name]] += 1
    return counts


def _position(loop, store_vars: list, reduce_order: list) -> int:
    """Index into POSITIONS of where ``loop`` sits for this store (Ansor's encoding)."""
    dims = [d for d, names in enumerate(store_vars) if loop.var in names]
    if dims and loop.var not in reduce_order:
        if dims == [len(store_vars) - 1]:
            return POSITIONS.index("inner_spatial")
        if dims == [0]:
            return POSITIONS.index("outer_spatial")
        return POSITIONS.index("middle_spatial")
    if loop.var in reduce_order:
        k = reduce_order.index(loop.var)
        if k == len(reduce_order) - 1:
            return POSITIONS.index("inner_reduce")
        if k == 0:
            return POSITIONS.index("outer_reduce")
        return POSITIONS.index("middle_reduce")
    return POSITIONS.index("mixed")


def loop_kind_features(loops, store_vars: list, reduce_order: list) -> list:
    out = []
    for kind in ("vectorized", "unrolled", "parallel"):
        mine = [lp for lp in loops if lp.kind == kind]
        pos = [0.0] * len(POSITIONS)
        if not mine:
            pos[0] = 1.0
            out += [0, 0, 0] + pos
            continue
        pos[_position(mine[-1], store_vars, reduce_order)] = 1.0
        out += [len(mine), math.prod(lp.extent for lp in mine), mine[-1].extent] + pos
    return out


def gpu_features(loops, is_gpu: bool) -> list:
    if not is_gpu:
        return [0.0] + [1.0] * len(GPU_TAGS)
    out = [1.0]
    for tag in GPU_TAGS:
        first = next((lp for lp in loops if lp.thread and lp.thread.startswith(tag)), None)
        out.append(first.extent if first else 1)
    return out


# ------------------------------------------------------------------ group 3

def intensity_curve(float_ops_per_iter: float, loops, touched_bytes: list) -> list:
    """Flops / unique bytes from the innermost loop outwards, sampled at 10 points
    evenly spaced in flops (MetaSchedule's group 3; linear between levels)."""
    n = len(loops)
    if n == 0 or float_ops_per_iter <= 0:
        return [0.0] * CURVE_SAMPLES
    compute, mem = [], []
    ops = float_ops_per_iter
    for i in range(n - 1, -1, -1):
        ops *= loops[i].extent
        compute.append(ops)
        mem.append(max(1, touched_bytes[i]))
    total, out, p = compute[-1], [], 0
    for k in range(CURVE_SAMPLES):
        cur = (k + 1) / CURVE_SAMPLES * total
        while p < n - 1 and compute[p] < cur - 1e-4:
            p += 1
        if p == 0:
            out.append(compute[0] / mem[0])
            continue
        base = compute[p - 1] / mem[p - 1]
        slope = (compute[p] / mem[p] - base) / max(1e-12, compute[p] - compute[p - 1])
        out.append(base + slope * (cur - compute[p - 1]))
    return out


# ------------------------------------------------------------------ assembly

class _Extractor:
    def __init__(self, machine: Machine):
        self.m = machine
        self.is_gpu = machine.is_gpu
        self.cache_line = machine.cache_line
        self.touched: dict = {}       # loop uid -> {buffer: (bytes per element, [numel, ...])}
        self._affine: dict = {}

    def parse(self, e):
        key = id(e)
        hit = self._affine.get(key)
        if hit is None or hit[0] is not e:
            hit = self._affine[key] = (e, parse_affine(e))
        return hit[1]

    def row(self, site, allocs) -> list:
        loops, store = site.loops, site.store
        prod = math.prod(lp.extent for lp in loops)
        value_nodes = acc_mod.nodes([store.value])
        value_counts = arith_counts(value_nodes)
        counts = [a + b for a, b in zip(value_counts, arith_counts(
            acc_mod.nodes([*store.indices, *site.guards])))]
        accesses = gather(store, self.parse, value_nodes)
        store_vars = [a.vars for a in accesses[0].indices[0]]
        read_vars = set()
        for a in accesses[1:]:
            read_vars |= a.region_vars
        if accesses[0].access == acc_mod.READ_WRITE:
            read_vars |= accesses[0].region_vars
        in_store = set().union(*store_vars) if store_vars else set()
        reduce_order = [lp.var for lp in loops if lp.var in read_vars and lp.var not in in_store]
        row = [c * prod for c in counts]
        row += loop_kind_features(loops, store_vars, reduce_order)
        row += gpu_features(loops, self.is_gpu)
        touched_bytes = self._buffers(accesses, loops)
        row += self._buffer_rows(accesses)
        flops = sum(counts[:7]) + counts[0]  # a multiply-add is two flops
        row += intensity_curve(flops, loops, touched_bytes)
        row += self._alloc(store.buffer, allocs, prod)
        unroll = [lp.unroll_step for lp in loops if lp.unroll_step > 0]
        row += [prod, len(loops), unroll[-1] if unroll else 0]
        row += target_features(accesses, loops, self.m, flops * prod, bool(site.guards),
                               value_counts)
        return row

    def _buffers(self, accesses, loops) -> list:
        touched_bytes = [0] * len(loops)
        for a in accesses:
            acc_mod.set_region(a, loops, self.cache_line)
            for i, lp in enumerate(loops):
                entry = self.touched.setdefault(lp.uid, {}).setdefault(
                    a.buffer.name, (a.dtype_bytes, []))
                entry[1].append(a.numel[i])
                touched_bytes[i] += a.numel[i] * a.dtype_bytes
        top = sum(a.dtype_bytes for a in accesses) if loops else 0
        for a in accesses:
            acc_mod.set_stride(a, loops)
            acc_mod.set_reuse(a, loops, self.touched, top)
            acc_mod.set_counts(a, loops, self.cache_line)
        return touched_bytes

    @staticmethod
    def _buffer_rows(accesses) -> list:
        ranked = sorted(accesses, key=lambda a: (-a.lines, -a.bytes, a.buffer.name))
        out: list = []
        for a in ranked[:BUFFERS_PER_STORE]:
            out += a.row()
        out += [0.0] * (len(BUFFER_FIELDS) * (BUFFERS_PER_STORE - min(len(ranked),
                                                                      BUFFERS_PER_STORE)))
        return out

    @staticmethod
    def _alloc(buffer, allocs, prod: int) -> list:
        site = allocs.get(buffer.name)
        if site is None:
            return [0, 0, 1, prod]
        numel = math.prod(site.buffer.shape)
        return [numel * DTYPE_BYTES.get(buffer.dtype, 4), numel * site.outer_prod,
                site.outer_prod, prod / site.outer_prod]


def store_rows(func, machine: Machine) -> list:
    """Raw feature rows, one per store of the lowered ``func``, in program order."""
    sites, allocs = collect(func)
    ex = _Extractor(machine)
    return [ex.row(site, allocs) for site in sites]
