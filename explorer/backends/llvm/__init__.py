"""The CPU backend: lowered loop nest -> LLVM IR (llvmlite) -> O3 -> MCJIT -> ctypes call.

``build_llvm(func, lowered, target)`` returns an ``LLVMKernel``. Compiled modules
are cached in-process by the structural value of the lowered function and the
target (IR nodes are frozen dataclasses, so equal nests hash equal): building
the same candidate twice costs one dictionary lookup.

Modules: ``codegen`` (statements, loops, allocation), ``exprgen`` (scalar and
vector expressions, lazy selects), ``analysis`` (lane dependence, legality of
vector code), ``parallel`` + ``runtime`` (outlined parallel loops on libgomp),
``vecmath`` (libmvec vector math), ``jit`` (O3 and MCJIT), ``types``.
"""
from __future__ import annotations

import ctypes
import functools
import threading
import time
from collections import OrderedDict

import numpy as np

from ...errors import ArgumentError
from ...ir.functor import walk_stmt
from ...ir.stmt import BufferStore, PrimFunc
from ..kernel import Kernel
from . import jit, runtime
from .codegen import PARAM_ALIGN, WORKSPACE_ALIGN, ModuleGen

CACHE_SIZE = 256
_cache: "OrderedDict[tuple, Compiled]" = OrderedDict()
_cache_lock = threading.Lock()


class Compiled:
    """One compiled module: IR text, machine code and how to call it."""

    def __init__(self, lowered: PrimFunc, target, runtime_name: str):
        t0 = time.perf_counter()
        gen = ModuleGen(lowered, target, runtime_name)
        self.llvm_ir = str(gen.build())
        runtime.prepare(runtime_name)
        self.jit = jit.JitModule(self.llvm_ir, gen.entry_name, target)
        self.compile_seconds = time.perf_counter() - t0
        self.workspace_bytes = gen.workspace_bytes
        self.vectorized_loops = dict(gen.vectorized_loops)
        self.chunk_lanes = gen.chunk_lanes
        self.written = frozenset(n.buffer.name for n, _ in walk_stmt(lowered.body)
                                 if isinstance(n, BufferStore))
        n = len(lowered.params) + 1
        self.cfunc = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * n))(self.jit.address)


def _cache_key(lowered: PrimFunc, target, runtime_name: str) -> tuple:
    return (lowered, target.mcpu, target.features, target.num_cores, target.vector_bits,
            runtime_name)


def compile_lowered(lowered: PrimFunc, target, runtime_name: str | None = None) -> Compiled:
    """The compiled module of a lowered function, from the cache when built before."""
    runtime_name = runtime_name or runtime.default_runtime()
    key = _cache_key(lowered, target, runtime_name)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    compiled = Compiled(lowered, target, runtime_name)
    with _cache_lock:
        _cache[key] = compiled
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


class LLVMKernel(Kernel):
    """A kernel compiled for the host CPU.

    ``llvm_ir`` is the IR the code generator emitted (before optimization);
    ``assembly`` the machine code as text (computed on first access);
    ``compile_seconds`` the time of IR generation + O3 + JIT of the first build.
    """

    target_kind = "llvm"

    def __init__(self, func: PrimFunc, lowered: PrimFunc, target, compiled: Compiled):
        super().__init__(func, lowered, compiled.llvm_ir)
        self.target = target
        self.compiled = compiled
        self.compile_seconds = compiled.compile_seconds
        self._assembly = None
        self._local = threading.local()

    @property
    def llvm_ir(self) -> str:
        return self.compiled.llvm_ir

    @property
    def assembly(self) -> str:
        if self._assembly is None:
            self._assembly = jit.assembly(self.compiled.llvm_ir, self.target)
        return self._assembly

    @property
    def optimized_ir(self) -> str:
        return jit.optimized_ir(self.compiled.llvm_ir, self.target)

    def _workspace(self) -> int:
        """Address of this thread's scratch memory for large intermediate buffers."""
        n = self.compiled.workspace_bytes
        if not n:
            return 0
        ws = getattr(self._local, "ws", None)
        if ws is None:
            raw = np.empty(n + WORKSPACE_ALIGN, dtype=np.uint8)
            off = (-raw.ctypes.data) % WORKSPACE_ALIGN
            ws = self._local.ws = (raw, raw.ctypes.data + off)
        return ws[1]

    def _run(self, arrays):
        _check_disjoint(self.func.params, arrays, self.compiled.written)
        ptrs, copies = [], []
        for p, a in zip(self.func.params, arrays):
            addr = a.ctypes.data
            if addr % PARAM_ALIGN:
                tmp = _aligned_copy(a)
                copies.append((a, tmp))
                addr = tmp.ctypes.data
            ptrs.append(addr)
        self.compiled.cfunc(*ptrs, self._workspace())
        for a, tmp in copies:
            a[...] = tmp


    def bind(self, *args):
        """A zero-argument callable that runs the kernel on ``args`` (checked here, once):
        the pointers are taken now, so a call is the native call alone. Timing loops use
        it (``measure.timing.fast_call``): ``_run`` per call checked the arguments'
        overlap and read every array's address again, 9 us against 2.6 us, 4% of a
        150 us row sum. Call it from the thread that bound it (the workspace is
        per thread); an argument not aligned for the kernel is copied on every call,
        as ``_run`` does."""
        arrays = self.check_args(args)
        _check_disjoint(self.func.params, arrays, self.compiled.written)
        if any(a.ctypes.data % PARAM_ALIGN for a in arrays):
            return lambda: self._run(arrays)
        call = functools.partial(self.compiled.cfunc, *(a.ctypes.data for a in arrays),
                                 self._workspace())
        call.arrays = arrays      # the memory the pointers name lives as long as the call
        call.kernel = self        # and the compiled code and workspace too (clear_cache
        return call               # drops the cache's hold on them)


def _aligned_copy(a: np.ndarray) -> np.ndarray:
    raw = np.empty(a.nbytes + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    out = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _check_disjoint(params, arrays, written) -> None:
    """Buffers are noalias: an output may not overlap any other argument (inputs may)."""
    spans = [(a.ctypes.data, a.ctypes.data + a.nbytes, p.name)
             for p, a in zip(params, arrays) if a.nbytes]
    for s0, e0, n0 in spans:
        if n0 not in written:
            continue
        for s1, e1, n1 in spans:
            if n1 != n0 and s1 < e0 and s0 < e1:
                raise ArgumentError(f"arguments {n0} and {n1} share memory, but {n0} is "
                                    "written and the llvm kernel assumes the buffers are "
                                    "distinct (noalias): pass a copy")


def build_llvm(func: PrimFunc, lowered: PrimFunc, target, runtime_name: str | None = None
               ) -> LLVMKernel:
    """Compile ``lowered`` (the lowering of ``func``) for the llvm ``target``."""
    return LLVMKernel(func, lowered, target, compile_lowered(lowered, target, runtime_name))


__all__ = ["build_llvm", "LLVMKernel", "compile_lowered", "clear_cache"]
