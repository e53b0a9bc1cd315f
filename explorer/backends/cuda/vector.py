"""Vectorized loops as ``float2``/``float4`` (``int2``/``int4``) accesses: the part of the
CUDA generator that emits them, once ``lanes.py`` has proven contiguity and alignment.

``for v in vectorized(L): [if cond:] X[...] = f(Y[...], ...)`` becomes chunks of ``w``
lanes (4, else 2): the contiguous aligned loads are vector loads, the value is computed
per component, and the store is a vector store where it is contiguous and aligned too
(per-lane stores otherwise). Anything not proven stays an unrolled scalar loop.
"""
from __future__ import annotations

from ...ir.arith import simplify
from ...ir.expr import And, BufferLoad, Expr, IntImm, Or, Select, Var
from ...ir.functor import collect_loads, expr_children, replace_loads, substitute
from ...ir.stmt import BufferStore, For, IfThenElse
from .cexpr import RawName, cname, ctype
from .lanes import flat_split, multiple_of, uniform_cond

_COMPONENTS = "xyzw"


class VectorEmitter:
    """Mixed into the kernel generator (``codegen._KernelGen``)."""

    def _vector(self, loop: For) -> bool:
        body, cond = loop.body, None
        if isinstance(body, IfThenElse) and body.else_case is None:
            body, cond = body.then_case, body.cond
        if not isinstance(body, BufferStore) or body.buffer.dtype not in ("float32", "int32"):
            return False
        if self.red:
            return False
        for w in (4, 2):
            if loop.extent % w == 0 and self._try_vector(loop, body, cond, w):
                return True
        return False

    def _try_vector(self, loop: For, store: BufferStore, cond, w: int) -> bool:
        v, lane = loop.var.name, f"{loop.var.name}_lane"
        chunk = f"{v}_c" if loop.extent > w else None
        to_lane = dict(self.subst)
        to_lane[v] = Var(lane) if chunk is None else Var(chunk) * w + Var(lane)
        ranges = dict(self.ranges)
        if chunk:
            ranges[chunk] = (0, loop.extent // w - 1)
        sub = lambda x: substitute(x, to_lane)          # noqa: E731
        if cond is not None and not uniform_cond(sub(cond), lane, w):
            return False

        def vectorizable(buf, indices) -> bool:
            if buf.scope == "local" or buf.dtype != store.buffer.dtype:
                return False
            if any(collect_loads(i) for i in indices):
                return False
            got = flat_split(buf.shape, tuple(sub(i) for i in indices), lane, w)
            return got is not None and got[1] == 1 and multiple_of(got[0], w)

        value = sub(store.value)
        st_idx = tuple(sub(i) for i in store.indices)
        vec_loads = []
        for ld in _eager_loads(value):
            if ld.buffer == store.buffer and ld.indices != st_idx:
                return False
            if vectorizable(ld.buffer, ld.indices) and ld not in vec_loads:
                vec_loads.append(ld)
        vec_store = vectorizable(store.buffer, store.indices)
        if any(ld.buffer == store.buffer for ld in collect_loads(value)) and not vec_store:
            return False
        if not vec_store and not vec_loads:
            return False
        self._emit_vector(loop, chunk, lane, w, cond, store, value, st_idx, vec_loads,
                          vec_store, ranges, sub)
        return True

    def _emit_vector(self, loop, chunk, lane, w, cond, store, value, st_idx, vec_loads,
                     vec_store, ranges, sub) -> None:
        saved_ranges = dict(self.ranges)
        self.ranges.update(ranges)
        vt = f"{ctype(store.buffer.dtype)}{w}"
        at0 = {lane: IntImm(0)}

        def addr(buf, indices):
            return "&" + self.access(buf, tuple(substitute(i, at0) for i in indices))
        opened = 0
        self.line(f"// {loop.var.name}: {loop.extent} lanes as {vt}")
        if chunk:
            self.line("#pragma unroll")
            c = cname(chunk)
            self.open(f"for (int {c} = 0; {c} < {loop.extent // w}; ++{c}) {{")
            opened += 1
        if cond is not None:
            self.open(f"if ({self.cx(simplify(substitute(sub(cond), at0), self.ranges))}) {{")
            opened += 1
        copy = vec_store and len(vec_loads) == 1 and value == vec_loads[0]
        if not opened and not copy:
            self.open("{")          # a scope for the vector temporaries
            opened += 1
        names = {}
        if copy:
            ld = vec_loads[0]
            self.line(f"*({vt}*){addr(store.buffer, st_idx)} = "
                      f"*(const {vt}*){addr(ld.buffer, ld.indices)};")
        else:
            for k, ld in enumerate(vec_loads):
                names[ld] = f"{cname(ld.buffer.name)}_v{k}"
                self.line(f"const {vt} {names[ld]} = *(const {vt}*){addr(ld.buffer, ld.indices)};")
            lanes = [self._lane_value(value, names, lane, j) for j in range(w)]
            if vec_store:
                out = f"{cname(store.buffer.name)}_out"
                self.line(f"{vt} {out};")
                for j, text in enumerate(lanes):
                    self.line(f"{out}.{_COMPONENTS[j]} = {text};")
                self.line(f"*({vt}*){addr(store.buffer, st_idx)} = {out};")
            else:
                for j, text in enumerate(lanes):
                    idx = tuple(substitute(i, {lane: IntImm(j)}) for i in st_idx)
                    self.line(f"{self.access(store.buffer, idx)} = {text};")
        for _ in range(opened):
            self.close()
        self.ranges.clear()
        self.ranges.update(saved_ranges)

    def _lane_value(self, value: Expr, names: dict, lane: str, j: int) -> str:
        comp = _COMPONENTS[j]
        picked = replace_loads(value, lambda ld: RawName(f"{names[ld]}.{comp}", ld.dtype)
                               if ld in names else None)
        return self.cx(simplify(substitute(picked, {lane: IntImm(j)}), self.ranges))


def _eager_loads(e: Expr) -> list:
    """Loads evaluated whatever the data (not under a select's branch or the right side
    of ``&&``/``||``): the ones a vector load may fetch ahead."""
    if isinstance(e, BufferLoad):
        return [e]
    if isinstance(e, Select):
        return _eager_loads(e.cond)
    if isinstance(e, (And, Or)):
        return _eager_loads(e.a)
    out = []
    for k in expr_children(e):
        out += _eager_loads(k)
    return out


