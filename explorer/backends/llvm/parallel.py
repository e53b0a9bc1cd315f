"""Outlining a parallel loop and launching it on the thread runtime.

For ``for p in range(N) (parallel): body`` the module gets three functions:

- ``..._body(ptr noalias bufs..., i64 vars..., i64 lo, i64 hi)``: the loop over
  ``[lo, hi)``; its own entry block holds the stack buffers of ``body``, so
  every thread has its own (``in_parallel`` also makes nested parallel loops
  serial here);
- ``..._task(ptr closure, i32 task, i32 ntasks)``: unpacks the captured
  pointers and loop variables from the closure and runs a balanced slice
  ``[task*N/ntasks, (task+1)*N/ntasks)``;
- with the OpenMP runtime, ``..._omp(ptr closure)`` calls the task with
  ``omp_get_thread_num()``/``omp_get_num_threads()`` and the loop site calls
  ``GOMP_parallel`` (through the pointer ``explorer_gomp_launcher``); with the
  fallback pool the site calls ``explorer_parallel_launch(task, closure, ntasks)``
  (both in ``runtime.py``).
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...ir.stmt import For
from .analysis import free_names
from .types import I32, I64, PTR, VOID


def emit_parallel(sg, loop: For) -> None:
    st, mod = sg.st, sg.st.mod
    var_names, buf_names = free_names(loop.body)
    cap_bufs = [n for n in sorted(buf_names) if n in st.bufs]
    cap_vars = [n for n in sorted(var_names) if n in st.vars and n != loop.var.name]
    base = f"{mod.entry_name}_par{mod.n_outlined}"
    mod.n_outlined += 1
    body_fn = _outline_body(sg, loop, base, cap_bufs, cap_vars)
    task_fn = _task_fn(mod, base, body_fn, loop.extent, len(cap_bufs), len(cap_vars))
    nthreads = max(1, min(mod.target.num_cores, loop.extent))
    closure = _pack_closure(st, [st.bufs[n] for n in cap_bufs] + [st.vars[n] for n in cap_vars])
    b = st.builder
    if nthreads == 1:  # one thread: no runtime call at all
        b.call(task_fn, [closure, ir.Constant(I32, 0), ir.Constant(I32, 1)])
    elif mod.runtime == "gomp":
        omp_fn = _omp_wrapper(mod, base, task_fn)
        launcher = b.load(_launcher_global(mod), typ=ir.FunctionType(
            VOID, [PTR, PTR, I32, I32]).as_pointer())   # GOMP_parallel (see runtime.py)
        b.call(launcher, [omp_fn, closure, ir.Constant(I32, nthreads), ir.Constant(I32, 0)])
    else:
        launch = mod.declare("explorer_parallel_launch", VOID, [PTR, PTR, I32])
        b.call(launch, [task_fn, closure, ir.Constant(I32, nthreads)])


def _launcher_global(mod) -> ir.GlobalVariable:
    from .runtime import GOMP_LAUNCHER
    g = mod.module.globals.get(GOMP_LAUNCHER)
    if g is None:
        g = ir.GlobalVariable(mod.module, PTR, GOMP_LAUNCHER)
        g.linkage = "external"
    return g


def _outline_body(sg, loop: For, base: str, cap_bufs: list, cap_vars: list) -> ir.Function:
    from .codegen import PARAM_ALIGN, FunctionState, StmtGen
    mod = sg.st.mod
    ftype = ir.FunctionType(VOID, [PTR] * len(cap_bufs) + [I64] * (len(cap_vars) + 2))
    fn = ir.Function(mod.module, ftype, base + "_body")
    fn.linkage = "internal"
    st = FunctionState(mod, fn, in_parallel=True)
    for arg, name in zip(fn.args, cap_bufs):
        arg.add_attribute("noalias")
        arg.attributes.align = PARAM_ALIGN
        arg.name = name
        st.bufs[name] = arg
    for arg, name in zip(fn.args[len(cap_bufs):], cap_vars):
        arg.name = name
        st.vars[name] = arg
    lo, hi = fn.args[-2], fn.args[-1]
    st.ranges = dict(sg.st.ranges)
    gen = StmtGen(st)
    gen.versioned = sg.versioned
    gen.serial(loop.var.name, lo, hi, lambda: gen.loop_body(loop))
    st.finish()
    return fn


def _pack_closure(st, values: list) -> ir.Value:
    slots = st.entry_alloca(I64, max(1, len(values)), 8)
    for i, v in enumerate(values):
        slot = st.builder.gep(slots, [ir.Constant(I32, i)], inbounds=True, source_etype=I64)
        st.builder.store(v, slot)
    return slots


def _task_fn(mod, base: str, body_fn: ir.Function, extent: int, n_bufs: int,
             n_vars: int) -> ir.Function:
    fn = ir.Function(mod.module, ir.FunctionType(VOID, [PTR, I32, I32]), base + "_task")
    fn.linkage = "internal"
    closure, task, ntasks = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    args = []
    for i in range(n_bufs + n_vars):
        slot = b.gep(closure, [ir.Constant(I32, i)], inbounds=True, source_etype=I64)
        args.append(b.load(slot, typ=PTR if i < n_bufs else I64))
    n = ir.Constant(I64, extent)
    t64, nt64 = b.sext(task, I64), b.sext(ntasks, I64)
    lo = b.sdiv(b.mul(t64, n), nt64)
    hi = b.sdiv(b.mul(b.add(t64, ir.Constant(I64, 1)), n), nt64)
    b.call(body_fn, args + [lo, hi])
    b.ret_void()
    return fn


def _omp_wrapper(mod, base: str, task_fn: ir.Function) -> ir.Function:
    fn = ir.Function(mod.module, ir.FunctionType(VOID, [PTR]), base + "_omp")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    tid = b.call(mod.declare("omp_get_thread_num", I32, []), [])
    nth = b.call(mod.declare("omp_get_num_threads", I32, []), [])
    b.call(task_fn, [fn.args[0], tid, nth])
    b.ret_void()
    return fn
