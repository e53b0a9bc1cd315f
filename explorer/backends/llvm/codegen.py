"""Lowered loop nest -> LLVM IR module (llvmlite.ir).

The module holds one exported function ``<name>(ptr params..., ptr workspace)``
and, per parallel loop, outlined helpers (see ``parallel.py``). Statements map
as follows:

- serial loop: a bottom-tested loop with a phi induction variable;
- unrolled loop: the body emitted once per iteration with the variable a
  constant (indices into local buffers fold to constants, so SROA/mem2reg
  keep those buffers in registers); a loop whose copies would store more than
  ``MAX_UNROLL`` registers, or a stack tile too big for the registers, stays a
  serial loop (``unrolling``);
- vectorized loop: the body emitted with vector values (``exprgen``), once per
  piece of a legal vector width (``vector_pieces``), long loops in chunks; when
  ``vectorize_blocker`` finds a reason, a plain serial loop (correct, left to
  LLVM's own vectorizers);
- parallel loop: outlined and run on the thread runtime; nested inside another
  parallel loop it runs serially;
- guards: branches, or lane masks where they depend on the lane; the body of one
  loop per nest is emitted twice, without the guards for the iterations where
  they all hold and with them for the rest, and so, at its own loop, for the
  conditions of selects (a padding read inline) (``versioning``);
- Allocate: see ``FunctionState.allocate``;
- a float division by a lane-invariant divisor in vector code: one reciprocal and
  products (``reciprocal``);
- a vectorized loop annotated ``software_prefetch``: prefetches of the rows ahead of
  its contiguous loads, one per cache line of each vector pass (``prefetch``);
- a serial or parallel loop annotated ``streaming_store``: non-temporal stores of the
  full vectors it writes to parameters where their address is a whole register, and
  an sfence after each iteration (``streaming``).

Lane masks (a guard that depends on the lane, the tail of a vectorized loop whose
extent is not a multiple of the register width) become masked loads and stores
(``llvm.masked.load`` / ``llvm.masked.store``: AVX-512 mask registers, AVX2
``vmaskmov``, legalized by LLVM on any x86). An access to a stack buffer whose
every lane is inside the buffer needs no mask: a plain load, or a store of
``select(mask, new, old)``, which keeps a register tile promotable to registers.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...errors import BuildError
from ...ir.functor import walk_stmt
from ...ir.stmt import (Allocate, BufferStore, For, IfThenElse, PrimFunc, SeqStmt, Stmt)
from . import (prefetch, reciprocal, streaming, tile_transpose, unrolling, vecmath,
               versioning)
from .analysis import free_names, vectorize_blocker
from .access import mt_align
from .exprgen import ExprEmitter
from .types import (ELEM_BYTES, I1, I8, I32, I64, PTR, VOID, const_int, lanes_of, mem_type,
                    suffix, vector_const)

MAX_UNROLL = 4096          # register stores an unrolled loop may expand to; beyond, a loop
MAX_VECTOR_LANES = 64      # a longer vectorized loop runs as a loop over vector chunks
STACK_BUFFER_BYTES = 64 * 1024   # one buffer up to this size lives on the stack
STACK_TOTAL_BYTES = 256 * 1024   # all stack buffers of one function together
WORKSPACE_ALIGN = 64
PARAM_ALIGN = 16           # numpy's allocator gives at least this; the kernel copies otherwise


class ModuleGen:
    """Builds the LLVM module for one lowered function."""

    def __init__(self, func: PrimFunc, target, runtime: str):
        self.func = func
        self.target = target
        self.runtime = runtime
        self.module = ir.Module(name=func.name)
        vecmath.use_target(self.module, target)
        self.entry_name = "explorer_" + "".join(c if c.isalnum() else "_" for c in func.name)
        self.workspace_bytes = 0
        self.n_outlined = 0
        self.hw_lanes = max(4, target.vector_bits // 32)   # float32 lanes of a register
        self.chunk_lanes = 2 * self.hw_lanes
        self.vectorized_loops: dict = {}   # loop var -> "vector" | why it runs as scalar code
        self._memo: dict = {}
        self.interned: dict = {}
        self.param_names = frozenset(p.name for p in func.params)

    def memo(self, kind: str, node, compute):
        """``compute()`` once per IR node object. Nodes are frozen dataclasses whose hash
        walks the whole subtree on every call, and an unrolled tile emits the same node
        many times: keyed by identity (the node is kept alive with the result)."""
        key = (kind, id(node))
        hit = self._memo.get(key)
        if hit is None or hit[0] is not node:
            hit = self._memo[key] = (node, compute())
        return hit[1]

    def declare(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return fn

    def build(self) -> ir.Module:
        _check_no_threads(self.func.body)
        params = [PTR] * (len(self.func.params) + 1)
        fn = ir.Function(self.module, ir.FunctionType(VOID, params), self.entry_name)
        for arg, buf in zip(fn.args, self.func.params):
            arg.add_attribute("noalias")
            arg.attributes.align = PARAM_ALIGN
            arg.name = buf.name
        fn.args[-1].name = "workspace"
        fn.args[-1].attributes.align = WORKSPACE_ALIGN
        st = FunctionState(self, fn, in_parallel=False, workspace=fn.args[-1])
        for arg, buf in zip(fn.args, self.func.params):
            st.bufs[buf.name] = arg
        StmtGen(st).stmt(self.func.body)
        st.finish()
        return self.module


def _check_no_threads(body: Stmt) -> None:
    for node, _ in walk_stmt(body):
        if isinstance(node, For) and node.kind == "thread":
            raise BuildError(f"loop {node.var.name} is bound to {node.thread}, which the CPU "
                             "backend cannot run: build with target 'cuda' for a GPU or "
                             "'interp' to run it serially, or remove the bind")


class FunctionState:
    """One LLVM function being emitted: builder, variables, buffers, stack and heap."""

    def __init__(self, mod: ModuleGen, fn: ir.Function, in_parallel: bool, workspace=None):
        self.mod = mod
        self.fn = fn
        self.in_parallel = in_parallel
        self.workspace = workspace
        self.ws_offset = 0
        self.entry = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        self.builder = ir.IRBuilder(body)
        self.vars: dict = {}
        self.bufs: dict = {}
        self.ranges: dict = {}       # loop variable -> (first, last) value, where known
        self.stack_numel: dict = {}  # stack buffer (an alloca) in scope -> its elements
        self.stack_bytes = 0
        self.heap: list = []
        self.entry_builder = ir.IRBuilder(self.entry)
        self.address_cache: dict = {}   # addresses computed in address_block (exprgen.gep)
        self.address_block = None

    def buffer_ptr(self, buf) -> ir.Value:
        try:
            return self.bufs[buf.name]
        except KeyError:
            raise BuildError(f"llvm codegen: buffer {buf.name} is used but neither a parameter "
                             "nor allocated") from None

    def entry_alloca(self, ty: ir.Type, count: int, align: int) -> ir.Value:
        a = self.entry_builder.alloca(ty, size=ir.Constant(I32, count))
        a.align = align
        a.type = PTR  # an opaque pointer, like every other pointer we emit
        return a

    def allocate(self, buf) -> tuple:
        """Storage for an Allocate: (pointer, release callback or None).

        Small buffers become entry-block allocas (per call, so per thread inside an
        outlined parallel body; mem2reg/SROA turn them into registers). Large ones
        take a slice of the caller's workspace in the main function (no malloc or
        page faults per call), or are malloc'ed per task inside a parallel body.
        Nothing is zero-filled: lowering initializes what it reads.
        """
        size = _nbytes(buf)
        if size <= STACK_BUFFER_BYTES and self.stack_bytes + size <= STACK_TOTAL_BYTES:
            self.stack_bytes += size
            return self.entry_alloca(mem_type(buf.dtype), _numel(buf), WORKSPACE_ALIGN), None
        if not self.in_parallel:
            start = self.ws_offset
            self.ws_offset = _round_up(start + size, WORKSPACE_ALIGN)
            self.mod.workspace_bytes = max(self.mod.workspace_bytes, self.ws_offset)
            ptr = self.builder.gep(self.workspace, [ir.Constant(I64, start)], inbounds=True,
                                   source_etype=I8)

            def release():
                self.ws_offset = start
            return ptr, release
        malloc = self.mod.declare("aligned_alloc", PTR, [I64, I64])
        ptr = self.entry_builder.call(malloc, [ir.Constant(I64, WORKSPACE_ALIGN),
                                               ir.Constant(I64, _round_up(size, 64))])
        self.heap.append(ptr)
        return ptr, None

    def finish(self) -> None:
        free = self.mod.declare("free", VOID, [PTR]) if self.heap else None
        for ptr in self.heap:
            self.builder.call(free, [ptr])
        self.builder.ret_void()
        self.entry_builder.branch(self.fn.blocks[1])


def vector_pieces(start: int, lanes: int, hw: int) -> list:
    """(first lane, lanes) of the passes for lanes [start, start + lanes): powers of two,
    largest first, so that every pass fills a power-of-two number of registers of ``hw``
    lanes or one part of a register. LLVM splits <32 x float> into two registers cleanly,
    but widens <48 x float> (3 zmm) to 4 and splits it back: a 16x48 register tile took
    1 s to compile and ran 5x slower than as 32 + 16 (a 48-lane BERT gemm candidate
    took 36 s); a <28 x float> accumulator ended up assembled element by element, 28 =
    16 + 8 + 4 runs in zmm, ymm and xmm registers."""
    out = []
    piece = 1 << max(0, lanes.bit_length() - 1)
    while lanes:
        while piece > lanes:
            piece //= 2
        out.append((start, piece))
        start, lanes = start + piece, lanes - piece
    return out


def unroll_budget(body: Stmt) -> int:
    """How many stores unrolling a loop around ``body`` may emit: ``MAX_UNROLL``, or an
    eighth of it when ``body`` keeps a loop of its own (every copy of that loop is one
    more loop for LLVM's loop passes to analyse, vectorize and unroll: 257 copies of a
    small guarded reduction took over a minute to compile)."""
    def has_loop(s) -> bool:
        if isinstance(s, For):
            if s.kind == "unrolled" or s.kind == "vectorized" and vectorize_blocker(s) is None:
                return has_loop(s.body)         # expanded by us, or vector code
            return True                         # a loop of LLVM's, however small
        if isinstance(s, SeqStmt):
            return any(has_loop(x) for x in s.stmts)
        if isinstance(s, IfThenElse):
            return has_loop(s.then_case) or (s.else_case is not None and has_loop(s.else_case))
        if isinstance(s, Allocate):
            return has_loop(s.body)
        return False
    return MAX_UNROLL // 8 if has_loop(body) else MAX_UNROLL


def _numel(buf) -> int:
    n = 1
    for d in buf.shape:
        n *= d
    return n


def _nbytes(buf) -> int:
    return _numel(buf) * ELEM_BYTES[buf.dtype]


def _round_up(n: int, k: int) -> int:
    return (n + k - 1) // k * k


class StmtGen:
    """Emits statements into one FunctionState."""

    def __init__(self, st: FunctionState):
        self.st = st
        self.ex = ExprEmitter(st)
        self.mask = None   # lanes that run the current statement, inside a vectorized loop
        self.versioned = frozenset()   # condition kinds versioned around (one level each)
        self.streaming = False   # inside the streaming copy of a loop (``streaming``)

    @property
    def b(self) -> ir.IRBuilder:
        return self.st.builder

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, BufferStore):
            self.store(s, self.ex)
        elif isinstance(s, IfThenElse):
            self.if_then_else(s)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, For):
            self.loop(s)
        else:
            raise BuildError(f"llvm codegen: unexpected statement {type(s).__name__}; lower the "
                             "function first (explorer.lower.lower)")

    # ------------------------------------------------------------ simple statements
    def store(self, s: BufferStore, ex: ExprEmitter, nontemporal: bool = False) -> None:
        """``nontemporal``: a streaming store, the caller having made sure that the
        vector's address is aligned to its size (``tile_transpose``)."""
        mask = self.mask
        expr = s.value if ex.lane is None else self.st.mod.memo(
            f"reciprocal {ex.lane}", s, lambda: reciprocal.rewrite(s.value, ex.lane))
        value = ex.to_mem(ex.emit(expr, mask), s.buffer.dtype)
        ptr = self.st.buffer_ptr(s.buffer)
        align = ir.Constant(I32, mt_align(mem_type(s.buffer.dtype)))
        if ex.lane is None:
            self.b.store(value, ex.gep(ptr, s))
            return
        value = ex.splat(value, ex.lanes)
        contiguous = ex.coeff(s) == 1
        if contiguous and mask is not None and ex.in_stack_bounds(s):
            # every lane inside a stack buffer: blend with the old value, store plainly
            addr = ex.gep(ptr, s, lane0=True)
            old = self.b.load(addr, typ=value.type, align=align.constant)
            value = self.b.select(ex.splat(mask, ex.lanes), value, old)
            mask = None
        addr = ex.gep(ptr, s, lane0=contiguous, inbounds=mask is None, mask=mask)
        if contiguous and mask is None:
            if nontemporal:
                streaming.store(self, value, addr, s.buffer.dtype, ex.lanes)
                return
            if self.streaming and s.buffer.name in self.st.mod.param_names and \
                    streaming.aligned_offset(self, s, ex):
                streaming.store_if_aligned(self, value, addr, s.buffer.dtype, ex.lanes,
                                           align.constant)
                return
            self.b.store(value, addr, align=align.constant)
            return
        mask = ex.all_true(ex.lanes) if mask is None else mask
        name = (f"llvm.masked.store.{suffix(value.type)}.p0" if contiguous else
                f"llvm.masked.scatter.{suffix(value.type)}.{suffix(addr.type)}")
        fn = self.st.mod.declare(name, VOID, [value.type, addr.type, I32, mask.type])
        self.b.call(fn, [value, addr, align, mask])

    def if_then_else(self, s: IfThenElse) -> None:
        cond = self.ex.emit(s.cond, self.mask)
        if lanes_of(cond) != 1:
            self.masked_if(s, cond)
            return
        then_bb = self.b.append_basic_block()
        else_bb = self.b.append_basic_block() if s.else_case is not None else None
        done_bb = self.b.append_basic_block()
        self.b.cbranch(cond, then_bb, else_bb or done_bb)
        self.b.position_at_end(then_bb)
        self.stmt(s.then_case)
        self.b.branch(done_bb)
        if else_bb is not None:
            self.b.position_at_end(else_bb)
            self.stmt(s.else_case)
            self.b.branch(done_bb)
        self.b.position_at_end(done_bb)

    def masked_if(self, s: IfThenElse, cond: ir.Value) -> None:
        """A guard that depends on the lane: both sides run, each under its lane mask."""
        outer = self.mask
        both = [(s.then_case, cond)]
        if s.else_case is not None:
            both.append((s.else_case, self.b.xor(cond, self.ex.all_true(lanes_of(cond)))))
        for body, m in both:
            self.mask = m if outer is None else self.b.and_(outer, m)
            self.stmt(body)
        self.mask = outer

    def allocate(self, s: Allocate) -> None:
        name = s.buffer.name
        ptr, release = self.st.allocate(s.buffer)
        saved = self.st.bufs.get(name)
        saved_numel = self.st.stack_numel.pop(name, None)
        self.st.bufs[name] = ptr
        if isinstance(ptr, ir.AllocaInstr):
            self.st.stack_numel[name] = _numel(s.buffer)
        self.stmt(s.body)
        if release is not None:
            release()
        self.st.stack_numel.pop(name, None)
        if saved_numel is not None:
            self.st.stack_numel[name] = saved_numel
        if saved is None:
            del self.st.bufs[name]
        else:
            self.st.bufs[name] = saved

    # ------------------------------------------------------------ loops
    def loop(self, s: For) -> None:
        if s.extent <= 0:
            return
        name = s.var.name
        saved = self.st.ranges.get(name)
        self.st.ranges[name] = (0, s.extent - 1)
        try:
            self.loop_kind(s)
        finally:
            if saved is None:
                del self.st.ranges[name]
            else:
                self.st.ranges[name] = saved

    def loop_kind(self, s: For) -> None:
        if s.annotations:
            streaming.enabled(s)      # refuses a bad value or a loop it cannot serve
        if s.kind == "unrolled" and tile_transpose.try_emit(self, s):
            return
        if s.kind == "unrolled" and self.st.mod.memo("unrolls", s, lambda: unrolling.expands(
                s, unroll_budget(s.body), self.st.stack_numel, self.st.mod.hw_lanes,
                self.st.mod.target.vector_registers)):
            for i in range(s.extent):
                self.with_var(s.var.name, ir.Constant(I64, i), lambda: self.stmt(s.body))
            return
        if s.kind == "vectorized":
            reason = self.st.mod.memo("blocker", s, lambda: vectorize_blocker(s)) \
                if s.extent > 1 else "a single lane"
            self.st.mod.vectorized_loops[s.var.name] = reason or "vector"
            if reason is None:
                self.vector_body(s)
                return
        if s.kind == "parallel" and not self.st.in_parallel and s.extent > 1:
            from .parallel import emit_parallel
            emit_parallel(self, s)
            return
        self.serial(s.var.name, ir.Constant(I64, 0), ir.Constant(I64, s.extent),
                    lambda: self.loop_body(s), known_nonempty=True)

    def loop_body(self, s: For) -> None:
        """The body of serial or parallel loop ``s``; twice, with and without its guards,
        when ``s`` is the versioning point of its nest (see ``versioning``); with
        streaming stores when ``s`` asks for them (``streaming``)."""
        if s.annotations and not self.streaming and streaming.enabled(s):
            streaming.emit_body(self, s, lambda: self.guard_versions(s))
            return
        self.guard_versions(s)

    def guard_versions(self, s: For) -> None:
        per_kind = self.st.mod.memo("version", s, lambda: versioning.bounds_by_kind(s))
        if not per_kind.keys() - self.versioned:
            self.stmt(s.body)
            return
        below = self.st.mod.memo("versionable", s, lambda: versioning.versionable_below(s.body))
        kinds, drop = versioning.to_drop(per_kind, self.versioned, self.st.ranges, below)
        if not drop:
            self.stmt(s.body)
            return
        plan = self.st.mod.memo(("version", frozenset(drop)), s,
                                lambda: versioning.plan_of(s, drop))
        cond = self.bounds_hold(plan.bounds)
        saved = self.versioned
        self.versioned = saved | frozenset(kinds)
        try:
            known = const_int(cond)
            if known is not None:
                self.stmt(plan.fast if known else s.body)
                return
            fast_bb = self.b.append_basic_block(f"{s.var.name}_unguarded")
            slow_bb = self.b.append_basic_block(f"{s.var.name}_guarded")
            done_bb = self.b.append_basic_block(f"{s.var.name}_versions_done")
            self.b.cbranch(cond, fast_bb, slow_bb)
            self.b.position_at_end(fast_bb)
            self.stmt(plan.fast)
            self.b.branch(done_bb)
            self.b.position_at_end(slow_bb)
            self.stmt(s.body)
            self.b.branch(done_bb)
            self.b.position_at_end(done_bb)
        finally:
            self.versioned = saved

    def bounds_hold(self, bounds) -> ir.Value:
        """i1: every ``versioning.Bound`` holds for the current values of the loops
        around (a constant when none depends on them)."""
        ex = ExprEmitter(self.st)
        out = ir.Constant(I1, 1)
        for bd in bounds:
            v = ir.Constant(I64, bd.const)
            for name, coef in bd.outer:
                v = ex.add64(v, ex.mul64(ex.bound(name), coef))
            for coef, atom in bd.atoms:
                v = ex.add64(v, ex.mul64(ex.sext64(ex.emit_index(atom)), coef))
            c = const_int(v)
            if c is not None:
                holds = ir.Constant(I1, int(c < 0 if bd.strict else c <= 0))
            else:
                holds = self.b.icmp_signed("<" if bd.strict else "<=", v, ir.Constant(I64, 0))
            if const_int(holds) == 0:
                return holds
            out = holds if const_int(out) == 1 else (
                out if const_int(holds) == 1 else self.b.and_(out, holds))
        return out

    def with_var(self, name: str, value: ir.Value, body) -> None:
        saved = self.st.vars.get(name)
        self.st.vars[name] = value
        body()
        if saved is None:
            del self.st.vars[name]
        else:
            self.st.vars[name] = saved

    def serial(self, name: str, lo: ir.Value, hi: ir.Value, body, known_nonempty=False):
        """for name in [lo, hi): body() -- bottom-tested, an i64 induction variable as a phi.

        Loop variables are i64 (indices are computed in i64, no sign extensions to
        widen later); where a variable is used as an int32 value it is truncated."""
        pre = self.b.block
        loop_bb = self.b.append_basic_block(f"for_{name}")
        skip = []
        if known_nonempty:
            self.b.branch(loop_bb)
        else:
            skip.append(self.b.block)
        self.b.position_at_end(loop_bb)
        iv = self.b.phi(I64, name=name)
        iv.add_incoming(lo, pre)
        self.with_var(name, iv, body)
        nxt = self.b.add(iv, ir.Constant(I64, 1), flags=("nuw", "nsw"))
        iv.add_incoming(nxt, self.b.block)
        exit_bb = self.b.append_basic_block(f"end_{name}")
        self.b.cbranch(self.b.icmp_signed("<", nxt, hi), loop_bb, exit_bb)
        for bb in skip:  # the emptiness test, now that the exit block exists
            self.b.position_at_end(bb)
            self.b.cbranch(self.b.icmp_signed("<", lo, hi), loop_bb, exit_bb)
        self.b.position_at_end(exit_bb)

    def vector_body(self, s: For) -> None:
        """The vectorized loop as vector statements: up to MAX_VECTOR_LANES lanes in
        passes of legal widths (``vector_pieces``), longer loops as a loop over chunks
        of ``chunk_lanes`` and passes for the rest."""
        width = self.st.mod.chunk_lanes
        if s.extent <= MAX_VECTOR_LANES:
            self.vector_passes(s, 0, s.extent)
            return
        chunks, rest = divmod(s.extent, width)
        name = f"{s.var.name}_chunk"

        def chunk():
            base = self.b.mul(self.st.vars[name], ir.Constant(I64, width), flags=("nsw",))
            self.vector_pass(s, base, width)
        self.serial(name, ir.Constant(I64, 0), ir.Constant(I64, chunks), chunk,
                    known_nonempty=True)
        self.vector_passes(s, chunks * width, rest)

    def vector_passes(self, s: For, start: int, lanes: int) -> None:
        """Lanes [start, start + lanes): the multiple of the register width in one pass,
        then the tail: a power of two in one more pass, otherwise one masked pass of the
        next power of two (lanes past the end masked off), or, when the body touches a
        stack buffer (a register tile, which masks and overlapping vectors would keep in
        memory), exact passes of powers of two (``vector_pieces``)."""
        hw = self.st.mod.hw_lanes
        main = lanes // hw * hw
        rest = lanes - main
        for at, n in vector_pieces(start, main, hw):     # 48 lanes of 16: 32 + 16
            self.vector_pass(s, ir.Constant(I64, at), n)
        if not rest:
            return
        first = start + main
        if rest & (rest - 1) == 0 or self.touches_stack(s.body):
            for at, n in vector_pieces(first, rest, hw):
                self.vector_pass(s, ir.Constant(I64, at), n)
            return
        width = 1 << rest.bit_length()
        self.vector_pass(s, ir.Constant(I64, first), width, valid=rest)

    def touches_stack(self, body: Stmt) -> bool:
        names = self.st.mod.memo("buffers", body, lambda: free_names(body)[1])
        return any(n in self.st.stack_numel for n in names)

    def vector_pass(self, s: For, base: ir.Value, lanes: int, valid: int | None = None
                    ) -> None:
        """The body for lanes [base, base + lanes) at once (one lane: scalar code); with
        ``valid``, only the first ``valid`` lanes run (a lane mask on every access)."""
        lane = s.var.name if lanes > 1 else None
        saved, self.ex = self.ex, ExprEmitter(self.st, lane=lane, lanes=lanes)
        saved_mask, saved_range = self.mask, self.st.ranges.get(s.var.name)
        if valid is not None:
            first = const_int(base)
            self.mask = vector_const(I1, (1,) * valid + (0,) * (lanes - valid))
            self.st.ranges[s.var.name] = (0, max(s.extent - 1, first + lanes - 1))
        try:
            self.with_var(s.var.name, base, lambda: (prefetch.emit(self, s, lanes),
                                                      self.stmt(s.body)))
        finally:
            self.ex = saved
            self.mask = saved_mask
            if saved_range is not None:
                self.st.ranges[s.var.name] = saved_range
