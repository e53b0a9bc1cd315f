"""The host's roofline, measured once: peak fp32 GFLOP/s and memory bandwidth.

A roofline picture needs the compute roof and the memory slope of the machine
the kernels ran on. Both are measured, not looked up, so they describe this
host whatever its ISA:

- compute: a JIT-compiled loop of independent fused multiply-add chains on
  vectors of the target's width (``Target.vector_lanes``), run on every core
  at once (one thread per core, ``Target.num_cores``): lanes x 2 flops x
  chains x iterations per call, over the wall time of the slowest thread;
- memory: a copy of a buffer twice the size of the last-level cache, split over the
  same threads (bytes read + bytes written, per second), the faster of numpy's copy and
  a JIT-compiled one with streaming (non-temporal) stores, which skip reading the
  destination into the cache first, as the code generator's streaming stores do;
- caches (``cache_roofs``): the same copy, compiled with ordinary stores, over a
  source and destination that together fill half of the cores' L2 caches, then half
  of the L3, repeated while they stay there. A task whose compulsory bytes fit in
  that much of a level runs again and again on data the level holds (a tuner's
  timing repeats a kernel without flushing the caches), so that level's copy bounds
  it, not the memory's.

Each is the best of a few runs (a roof is a maximum). The job runs in a worker
process (``handlers="explorer.measure.roofline"``), like every other timing. On a
virtual machine the memory's bandwidth is shared with the host's other guests: a
2-core Zen 5 read its streaming copy at 59-67 GB/s and at 114-120 within the same
quarter of an hour, with nothing else running in the guest.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..errors import MeasureError
from .buffers import argument_offsets, placed_full
from .timing import scale_until

CHAINS = 12        # independent FMA chains: > latency x FMA pipes on current CPUs
CALL_SECS = 0.02   # one timed call of the FMA loop, per thread
RUNS = 5


@dataclass(frozen=True)
class Roofline:
    """Peak fp32 GFLOP/s and memory bandwidth (GB/s) of a host; ``source`` says how
    they were obtained, for a legend."""
    peak_gflops: float
    bandwidth_gbs: float
    source: str = ""
    # (level, bytes, GB/s), the smallest level first: a task whose compulsory bytes are
    # at most ``bytes`` is bounded by that level's copy bandwidth (the module docstring)
    cache_roofs: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "cache_roofs", tuple(
            (str(name), int(size), float(gbs)) for name, size, gbs in self.cache_roofs))

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (flop/byte) where the compute roof meets the memory's."""
        return self.peak_gflops / self.bandwidth_gbs

    def bandwidth_for(self, nbytes: int) -> tuple:
        """(level, GB/s) that bounds a task moving ``nbytes`` compulsory bytes: the
        smallest cache level that holds them (``cache_roofs``), else the memory; never
        below the memory's bandwidth."""
        for name, size, gbs in self.cache_roofs:
            if nbytes <= size:
                return name, max(gbs, self.bandwidth_gbs)
        return "memory", self.bandwidth_gbs

    def attainable_gflops(self, workload) -> float:
        """The roof over ``workload``: the compute peak, or its compulsory traffic at the
        bandwidth of the level that holds it (``bandwidth_for``) where that is lower."""
        nbytes = compulsory_bytes(workload)
        return min(self.peak_gflops,
                   workload.flops / max(1, nbytes) * self.bandwidth_for(nbytes)[1])

    def as_json(self) -> dict:
        return {"peak_gflops": self.peak_gflops, "bandwidth_gbs": self.bandwidth_gbs,
                "source": self.source, "cache_roofs": [list(c) for c in self.cache_roofs]}


def compulsory_bytes(workload) -> int:
    """Bytes every run of ``workload`` moves at least: each parameter (every input read,
    every output written) once."""
    return sum(int(np.prod(p.shape)) * np.dtype(p.dtype).itemsize
               for p in workload.func.params)


def intensity(workload) -> float:
    """Arithmetic intensity of ``workload`` in flop/byte of its compulsory traffic."""
    return workload.flops / max(1, compulsory_bytes(workload))


def _splat(value: float, lanes: int) -> str:
    return "<" + ", ".join(f"float {value:e}" for _ in range(lanes)) + ">"


def fma_loop_ir(lanes: int, chains: int = CHAINS) -> str:
    """LLVM IR of ``void peak(i64 n, float* out)``: ``n`` iterations of ``chains``
    independent ``a = fma(a, 0.5, 0.25)`` on ``<lanes x float>``; their sum goes to
    ``out`` so that nothing is dead."""
    vt = f"<{lanes} x float>"
    fma = f"@llvm.fma.v{lanes}f32"
    half, quarter = _splat(0.5, lanes), _splat(0.25, lanes)
    out = [f"declare {vt} {fma}({vt}, {vt}, {vt})", "",
           "define void @peak(i64 %n, float* %out) {", "entry:", "  br label %loop", "loop:",
           "  %i = phi i64 [0, %entry], [%i.next, %loop]"]
    out += [f"  %a{c} = phi {vt} [{_splat(float(c), lanes)}, %entry], [%b{c}, %loop]"
            for c in range(chains)]
    out += [f"  %b{c} = call {vt} {fma}({vt} %a{c}, {vt} {half}, {vt} {quarter})"
            for c in range(chains)]
    out += ["  %i.next = add i64 %i, 1", "  %done = icmp uge i64 %i.next, %n",
            "  br i1 %done, label %exit, label %loop", "exit:"]
    prev = "%b0"
    for c in range(1, chains):
        out.append(f"  %s{c} = fadd {vt} {prev}, %b{c}")
        prev = f"%s{c}"
    out += [f"  %x = extractelement {vt} {prev}, i32 0", "  store float %x, float* %out",
            "  ret void", "}"]
    return "\n".join(out) + "\n"


def _on_threads(fn, threads: int) -> float:
    """Wall seconds for ``threads`` threads each running ``fn(k)`` (started together)."""
    start = threading.Barrier(threads + 1)
    pool = [threading.Thread(target=lambda k=k: (start.wait(), fn(k))) for k in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    return time.perf_counter() - t0


def peak_gflops(target, threads: int) -> float:
    """Measured fp32 GFLOP/s of FMA chains on ``target``'s vectors, ``threads`` at once."""
    from ..backends.llvm.jit import JitModule
    lanes = target.vector_lanes
    module = JitModule(fma_loop_ir(lanes), "peak", target)
    call = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(ctypes.c_float))(module.address)
    sinks = [ctypes.c_float() for _ in range(threads)]
    # calibrate on one thread: iterations for about CALL_SECS per call
    n, secs = scale_until(lambda n: call(n, ctypes.byref(sinks[0])), CALL_SECS / 4,
                          start=1 << 10, cap=1 << 40)
    n = max(1, int(n * CALL_SECS / max(secs, 1e-9)))
    best = min(_on_threads(lambda k: call(n, ctypes.byref(sinks[k])), threads)
               for _ in range(RUNS))
    return threads * n * CHAINS * lanes * 2 / best / 1e9


def copy_bytes(llc_bytes: int) -> int:
    """Size of the copied buffer: twice the last-level cache, 32 to 128 MiB."""
    return min(max(2 * llc_bytes, 32 * 2 ** 20), 128 * 2 ** 20)


def copy_bandwidth_gbs(nbytes: int, threads: int) -> float:
    """Measured GB/s of a numpy copy of ``nbytes`` split over ``threads`` (read + write)."""
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.zeros_like(src)
    parts = np.array_split(np.arange(src.size), threads)
    bounds = [(int(p[0]), int(p[-1]) + 1) for p in parts if len(p)]

    def copy(k):
        lo, hi = bounds[k]
        np.copyto(dst[lo:hi], src[lo:hi])
    _on_threads(copy, len(bounds))  # the first touch of dst's pages is not bandwidth
    best = min(_on_threads(copy, len(bounds)) for _ in range(RUNS))
    return 2 * nbytes / best / 1e9


def copy_loop_ir(lanes: int, streaming: bool) -> str:
    """LLVM IR of ``void copy(float* dst, float* src, i64 n, i64 reps)``: ``reps`` times,
    copy ``n`` floats (a multiple of ``lanes``, 64-byte aligned) in ``<lanes x float>``
    loads and stores, non-temporal where ``streaming``; a fence after each pass."""
    vt = f"<{lanes} x float>"
    hint = ", !nontemporal !0" if streaming else ""
    return "\n".join([
        "define void @copy(ptr noalias %dst, ptr noalias %src, i64 %n, i64 %reps) {",
        "entry:", "  br label %pass",
        "pass:", "  %r = phi i64 [0, %entry], [%r.next, %passed]", "  br label %loop",
        "loop:", "  %i = phi i64 [0, %pass], [%i.next, %loop]",
        "  %from = getelementptr inbounds float, ptr %src, i64 %i",
        f"  %v = load {vt}, ptr %from, align 64",
        "  %to = getelementptr inbounds float, ptr %dst, i64 %i",
        f"  store {vt} %v, ptr %to, align 64{hint}",
        f"  %i.next = add i64 %i, {lanes}", "  %done = icmp uge i64 %i.next, %n",
        "  br i1 %done, label %passed, label %loop",
        "passed:", "  fence seq_cst", "  %r.next = add i64 %r, 1",
        "  %all = icmp uge i64 %r.next, %reps", "  br i1 %all, label %exit, label %pass",
        "exit:", "  ret void", "}", "!0 = !{i32 1}", ""])


def jit_copy_gbs(target, nbytes: int, threads: int, streaming: bool,
                 total_bytes: int = 0, runs: int = RUNS) -> float:
    """Measured GB/s (read + write) of the JIT copy of ``nbytes`` split over ``threads``,
    each thread's part copied again until ``total_bytes`` have been copied (or once),
    the best of ``runs``; the copy is checked."""
    from ..backends.llvm.jit import JitModule
    lanes = target.vector_lanes
    module = JitModule(copy_loop_ir(lanes, streaming), "copy", target)
    copy = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                            ctypes.c_int64)(module.address)
    part = max(lanes, nbytes // 4 // threads // (16 * lanes) * (16 * lanes))
    # placed as every timed kernel's arguments are (line-aligned, huge pages, staggered)
    at = argument_offsets(2)
    src = placed_full(part * threads, 1.0, np.float32, at[0])
    dst = placed_full(part * threads, 0.0, np.float32, at[1])
    reps = max(1, total_bytes // (part * threads * 4))

    def run(k):
        copy(dst.ctypes.data + 4 * k * part, src.ctypes.data + 4 * k * part, part, reps)
    _on_threads(run, threads)      # first touch, and the caches filled
    best = min(_on_threads(run, threads) for _ in range(runs))
    if not np.array_equal(dst, src):
        raise MeasureError("the roofline's copy kernel copied wrong values")
    return 2 * 4 * part * threads * reps / best / 1e9


# Bytes a JIT copy moves per timed run, and its runs. On a quiet 2-core Zen 5, runs of
# 256 MiB, best of 5, read the L2 copy at 236-459 GB/s and the L3's at 180-228 from one
# measurement to the next; runs of 1 GiB, best of 10, at 484-487 and 185-190, and the
# streaming memory copy (16 passes over 64 MiB) at 66-68 GB/s where one pass read 55-59.
COPY_RUN_BYTES = 2 ** 30
COPY_RUNS = 10


def cache_roofs(target, threads: int) -> tuple:
    """((level, bytes, GB/s), ...): the copy bandwidth of source and destination that
    together fill half of the ``threads`` cores' L2 caches, then half of the L3 (a
    level no larger than the one before it is left out)."""
    out, below = [], 0
    for name, size in (("L2", threads * target.l2_bytes), ("L3", target.l3_bytes)):
        fits = size // 2
        if fits <= below:
            continue
        out.append((name, fits, jit_copy_gbs(target, fits // 2, threads, False,
                                              COPY_RUN_BYTES, COPY_RUNS)))
        below = fits
    return tuple(out)


def _cpu(target):
    if target.kind != "llvm":
        raise MeasureError(f"a roofline is measured for an llvm (CPU) target, not "
                           f"{target.kind!r}: use measure_roofline('llvm') for this host")
    return target


def roofline_job(payload: dict, emit) -> dict:
    """Measure the roofline of the target in ``payload`` (worker side)."""
    from ..target import Target
    target = _cpu(Target(payload["target"]))
    threads = max(1, target.num_cores or os.cpu_count() or 1)
    peak = peak_gflops(target, threads)
    nbytes = copy_bytes(target.l3_bytes)
    bandwidth = max(copy_bandwidth_gbs(nbytes, threads),
                    jit_copy_gbs(target, nbytes, threads, True, COPY_RUN_BYTES, COPY_RUNS))
    caches = cache_roofs(target, threads)
    levels = "".join(f", {name} {gbs:.0f} GB/s" for name, _, gbs in caches)
    source = (f"measured: FMA on {target.vector_lanes} fp32 lanes x {threads} "
              f"thread{'s' * (threads > 1)}, a {nbytes >> 20} MiB copy{levels}")
    return Roofline(peak, bandwidth, source, caches).as_json()


def roofline_of_result(msg: dict) -> Roofline:
    """The Roofline in a worker's ``done`` message; MeasureError when the job failed."""
    if "error" in msg:
        raise MeasureError(f"measuring the roofline failed: {msg['error']}")
    return Roofline(**msg["result"])


def measure_roofline(target="llvm", timeout: float = 60.0) -> Roofline:
    """Measure the roofline of ``target`` (an llvm target; default this host) once, in a
    worker process of its own."""
    from ..target import as_target
    from .pool import WorkerPool
    target = _cpu(as_target(target))
    with WorkerPool(1, "explorer.measure.roofline") as pool:
        return roofline_of_result(pool[0].call("roofline", {"target": str(target)},
                                               lambda ph, m: timeout))


HANDLERS = {"roofline": roofline_job}
