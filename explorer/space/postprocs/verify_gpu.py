"""Verify GPU code: reject a candidate that breaks the limits of the target GPU."""
from __future__ import annotations

import math

from ...errors import PostprocError
from ...ir.functor import collect_loads, substitute, walk_stmt
from ...ir.region import union_region
from ...ir.stmt import Allocate, BlockRealize, For, SeqStmt
from ...lower import lower
from ...schedule.loop_prims import launch_extents, threads_per_block
from ...schedule.tree import loops_of, realizes_under
from .. import analysis as A
from ..postproc import Postproc

_BYTES = {"float32": 4, "float64": 8, "int32": 4, "bool": 1}
# thread axes whose iterations share a buffer of the scope (MetaSchedule's
# CanRelaxStorageUnderThread; local buffers count once per virtual thread)
_SHARED_BY = {"shared": ("threadIdx", "vthread"), "local": ("vthread",)}
# registers a thread needs besides its local arrays (loop counters, addresses, the operands
# loaded from shared memory): a round, low figure, so that only what cannot fit is refused
# before build; ptxas's report after compiling (backends/cuda/resources.py) judges the rest.
# On 20 sampled gemm 512^3 and conv2d 64x56x56 kernels (nvcc 13.0, sm_90) ptxas used
# between 80 fewer registers and 145 more than the local words (median 35 more): fewer
# where it found accumulators dead, more for a conv's index arithmetic. Shared memory,
# read from the same lowered program, matched ptxas's smem to within 8 bytes.
REGISTER_OVERHEAD = 16


def register_limit(target, threads: int) -> int:
    """Registers a thread of a block of ``threads`` may use: the target's maximum per
    thread, and the SM's register file shared by the block (a block whose threads need
    more than ``max_registers_per_sm`` in all cannot launch)."""
    return min(target.max_registers_per_thread, target.max_registers_per_sm // max(threads, 1))


def register_estimate(local_words: int) -> int:
    """Registers per thread for ``local_words`` 4-byte words of local arrays."""
    return local_words + REGISTER_OVERHEAD


class VerifyGPUCode(Postproc):
    """Check every kernel (top-level loop nest) against the target, before build:

    - threads per block (``max_threads_per_block``), one extent per thread axis, at most
      ``max_vthread`` virtual threads, the thread range multi-level tiling asked for, and
      that all work is bound to threads (on the schedule tree);
    - vector widths (at most ``max_vector_bytes``);
    - shared memory per block (``max_shared_memory_per_block``) and the registers a thread
      needs, estimated as its local arrays' 4-byte words plus ``REGISTER_OVERHEAD``,
      within ``max_registers_per_thread`` and the SM's ``max_registers_per_sm`` shared by
      the block's threads (``register_limit``). Both are read from the lowered program
      (``kernel_memory``): the buffers as ``explorer.lower`` allocates them, what the code
      generators emit. A local array counts once per virtual thread (each owns a copy).

    The launch checks share ``launch_extents`` with ``bind``, which refuses CUDA's
    own limits (1024 threads per block, one extent per axis) when the loop is bound.
    """

    def __init__(self, max_vector_bytes: int = 16, max_vthread: int = 8):
        self.max_vector_bytes = max_vector_bytes
        self.max_vthread = max_vthread

    def precheck(self, sch) -> None:
        """The thread range multi-level tiling asked for: the other postprocessors bind
        no thread that changes it."""
        self._check_thread_ranges(sch.func)

    def apply(self, sch) -> None:
        func, t = sch.func, self.target
        self._check_thread_ranges(func)
        for kernel in _kernels(func.body):
            self._check_kernel(kernel, t)
        for use in kernel_memory(lower(func)):
            self._check_memory(use, t)

    @staticmethod
    def _check_memory(use: dict, t) -> None:
        """Shared bytes per block and local words (registers) per thread of one kernel of
        the lowered program: what the code generator allocates."""
        name, shared, words = use["kernel"], use["shared_bytes"], use["local_words"]
        if shared > t.max_shared_memory_per_block:
            raise PostprocError(f"kernel at loop {name!r} needs {shared} bytes of shared memory "
                                f"per block, more than the target's "
                                f"{t.max_shared_memory_per_block}")
        if words * 4 > t.max_local_memory_per_block:
            raise PostprocError(f"kernel at loop {name!r} needs {words * 4} bytes of local "
                                f"memory per thread, more than the target's "
                                f"{t.max_local_memory_per_block}")
        regs, limit = register_estimate(words), register_limit(t, use["threads"])
        if regs > limit:
            raise PostprocError(
                f"kernel at loop {name!r} needs about {regs} registers per thread ({words} "
                f"words of local arrays + {REGISTER_OVERHEAD}), more than the {limit} the "
                f"target allows a block of {use['threads']} threads (at most "
                f"{t.max_registers_per_thread} per thread, {t.max_registers_per_sm} per SM); "
                "use smaller register tiles or fewer threads")

    def _check_kernel(self, kernel: For, t) -> None:
        for node, _ in walk_stmt(kernel):
            if isinstance(node, For) and node.kind == "vectorized":
                self._check_vector(node)
        extents = {tag: {e for e, _ in v} for tag, v in launch_extents(kernel).items()}
        name = kernel.var.name
        if not any(tag.startswith(("blockIdx", "threadIdx")) for tag in extents):
            raise PostprocError(f"kernel at loop {name!r} is not bound to GPU threads; bind "
                                "its outer loops to blockIdx.x and threadIdx.x")
        for tag, exts in extents.items():
            if len(exts) > 1:
                raise PostprocError(f"kernel at loop {name!r}: loops bound to {tag} have "
                                    f"different extents {sorted(exts)}; a kernel has one "
                                    f"{tag} extent")
        threads = threads_per_block(launch_extents(kernel))
        if threads > t.max_threads_per_block:
            raise PostprocError(f"kernel at loop {name!r} uses {threads} threads per block, more "
                                f"than the target's {t.max_threads_per_block}")
        vthreads = math.prod(max(e) for tag, e in extents.items() if tag.startswith("vthread"))
        if vthreads > self.max_vthread:
            raise PostprocError(f"kernel at loop {name!r} uses {vthreads} virtual threads, more "
                                f"than {self.max_vthread}")

    def _check_vector(self, loop: For) -> None:
        for r, _ in realizes_under(loop.body):
            width = loop.extent * _BYTES.get(r.block.body.buffer.dtype, 4)
            if width > self.max_vector_bytes:
                raise PostprocError(f"vectorized loop {loop.var.name!r} of extent {loop.extent} "
                                    f"moves {width} bytes at once; GPU vectors hold at most "
                                    f"{self.max_vector_bytes}")

    @staticmethod
    def _check_thread_ranges(func) -> None:
        for node, path in walk_stmt(func.body):
            if not isinstance(node, BlockRealize):
                continue
            anns = dict(node.block.annotations)
            if A.THREAD_EXTENT_LOW not in anns:
                continue
            threads = A.thread_extent(path)
            low, high = anns[A.THREAD_EXTENT_LOW], anns[A.THREAD_EXTENT_HIGH]
            if not low <= threads <= high:
                raise PostprocError(f"block {node.block.name!r} runs on {threads} threads per "
                                    f"block; its tiling asks for {low} to {high}")


def kernel_memory(lowered) -> list:
    """Per kernel (outermost loop) of a lowered function: ``{"kernel", "threads",
    "shared_bytes", "local_words"}``, read from its thread loops and ``Allocate`` nodes.
    Shared bytes are per block; local words (4 bytes each) per thread: a local buffer
    allocated inside vthread loops counts once per virtual thread (each owns a copy)."""
    out = []
    for kernel in _kernels(_strip_allocs(lowered.body)):
        shared = words = 0
        for node, path in walk_stmt(kernel):
            if not isinstance(node, Allocate) or node.buffer.scope not in _SHARED_BY:
                continue
            buf = node.buffer
            nbytes = math.prod(buf.shape) * _BYTES.get(buf.dtype, 4)
            if buf.scope == "shared":
                shared += nbytes
            else:
                copies = math.prod(lp.extent for lp in path if isinstance(lp, For)
                                   and lp.kind == "thread" and lp.thread.startswith("vthread"))
                words += copies * -(-nbytes // 4)
        out.append({"kernel": kernel.var.name, "shared_bytes": shared, "local_words": words,
                    "threads": threads_per_block(launch_extents(kernel))})
    return out


def _strip_allocs(body):
    while isinstance(body, Allocate):
        body = body.body
    return body


def footprints(func) -> dict:
    """{(kernel loop name, scope): bytes} of the shared and local buffers of ``func``,
    bounded on the schedule tree before lowering (what ``mutators/gpu_limits.py``
    works out from the decisions): at least what lowering allocates, more where the
    lowered indices are tighter (a cooperative fetch's excess clamped to the buffer)."""
    out: dict = {}
    all_ranges = {n.var.name: (0, n.extent - 1) for n, _ in walk_stmt(func.body)
                  if isinstance(n, For)}
    for buf in func.alloc_buffers:
        if buf.scope not in _SHARED_BY:
            continue
        sites = _sites(func, buf.name)
        if not sites:
            continue
        lca = _common_prefix([p for p, _ in sites])
        keep = {lp.var.name for lp in lca if not (lp.kind == "thread" and lp.thread.split(".")[0]
                                                   in _SHARED_BY[buf.scope])}
        prepared = [(idx, {lp.var.name: (0, lp.extent - 1) for lp in path
                           if lp.var.name not in keep}) for path, idx in sites]
        region = union_region(prepared, buf.shape, all_ranges)
        shape = [ext for _, ext in region] if region is not None else list(buf.shape)
        key = (sites[0][0][0].var.name if sites[0][0] else "", buf.scope)
        out[key] = out.get(key, 0) + math.prod(shape) * _BYTES.get(buf.dtype, 4)
    return out


def _sites(func, name: str) -> list:
    sites = []
    for r, path in realizes_under(func.body):
        b = r.block
        bind = {iv.var.name: v for iv, v in zip(b.iter_vars, r.iter_values)}
        idxs = [ld.indices for ld in collect_loads(b.body.value) if ld.buffer.name == name]
        if b.body.buffer.name == name:
            idxs.append(b.body.indices)
        loops = loops_of(path)
        sites += [(loops, tuple(substitute(i, bind) for i in idx)) for idx in idxs]
    return sites


def _common_prefix(paths: list) -> list:
    common = list(paths[0])
    for p in paths[1:]:
        n = 0
        while n < len(common) and n < len(p) and common[n].var == p[n].var:
            n += 1
        common = common[:n]
    return common


def _kernels(body) -> list:
    """The outermost loops of a function body (through sequences)."""
    if isinstance(body, For):
        return [body]
    if isinstance(body, SeqStmt):
        return [k for s in body.stmts for k in _kernels(s)]
    return []
