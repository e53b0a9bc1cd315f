"""The names of the per-store features, in row order, and the groups they form.

The first 164 values follow MetaSchedule's ``PerStoreFeature``; the last three
groups are ours: "target" (18 values), what the first nine groups leave
implicit about this CPU backend and the target's caches, cores and vector
width; "codegen" (14 values, :mod:`explorer.features.codegen`), what LLVM
makes of the innermost loops and a cycle estimate from it, which the cost
model starts from; "gpu_resources" (7 values,
:mod:`explorer.features.gpu_resources`), what a CUDA kernel uses of an SM
(registers, spills, shared memory, occupancy), ptxas's figures where known.
Trained on 256 measured gemm or conv2d candidates (CPU, before the last group), the
cost model ranks 0.822 of the pairs of the next 64 right with all 196 values,
0.805 with the first 182 and no prior, 0.774 with MetaSchedule's 164
(benchmarks/cost_model_accuracy.py).

==============  =====  ==========================================================
group           count  what
==============  =====  ==========================================================
arith           16     float/int arithmetic by kind, bool and select ops, each
                       weighted by the trip count of the enclosing loops
vectorize       11     number, product of extents, innermost extent of the
                       vectorized loops around the store, position one-hot (8)
unroll          11     the same for unrolled loops
parallel        11     the same for parallel loops
gpu             8      is_gpu, extents of blockIdx.x/y/z, threadIdx.x/y/z, vthread
buffers         90     5 buffers (most cache lines first) x 18: access type
                       one-hot (3), bytes, unique bytes, lines, unique lines,
                       reuse type one-hot (3), reuse distance in iterations and
                       in bytes, reuse count, the four counts divided by the
                       reuse count, stride of the innermost loop
intensity       10     arithmetic intensity (flops / unique bytes) sampled at 10
                       points along the loop nest, outer levels weigh more
alloc           4      size of the stored buffer's allocation, size x times it
                       is allocated, loops outside and inside the allocation
outer           3      product of all loop extents, number of loops, auto unroll
                       step annotation
target          18     bytes fetched into L1, L2, L3 (the lines touched under the
                       outermost loop whose lines fit, times the trips around it);
                       vector length / target lanes; parallel balance over the
                       cores and iterations per core; the innermost emitted loop
                       (outside the unrolled/vector "body"): extent, real vector
                       code and its fraction of non-gather accesses, fraction of
                       accesses dense along the inner loop, accumulation,
                       body statements, body store and load elements, guarded;
                       roofline-style estimates in cycles: compute, memory, max
codegen         14     vector code (none, LLVM's loop vectorizer, the backend's)
                       and its width; accumulator registers, kept in registers,
                       dependence chain; per iteration of the loop LLVM keeps
                       innermost: arithmetic, loads, stores, cycles; iterations;
                       estimated cycles of the store, with memory, flops per
                       cycle; lines per L1 set (conflict misses)
gpu_resources   7      per CUDA kernel (0 on CPU targets): registers per thread,
                       spill store and load bytes, shared bytes per block, threads
                       per block, occupancy (resident warps / the SM's most),
                       1 when these are ptxas's report, 0 when estimated
                       (:mod:`explorer.features.gpu_resources`)
==============  =====  ==========================================================

Every value is ``log2(|x| + 1)`` (one-hot entries stay 0 or 1).
"""
from __future__ import annotations

from .codegen import NAMES as CODEGEN
from .gpu_resources import NAMES as GPU_RESOURCES

ARITH = ("float_mad", "float_add_sub", "float_mul", "float_div_mod", "float_cmp",
         "float_math_func", "float_other_func", "int_mad", "int_add_sub", "int_mul",
         "int_div_mod", "int_cmp", "int_math_func", "int_other_func", "bool_op", "select_op")

POSITIONS = ("none", "inner_spatial", "middle_spatial", "outer_spatial", "inner_reduce",
             "middle_reduce", "outer_reduce", "mixed")

LOOP_KIND_GROUPS = (("vec", "vectorize"), ("unroll", "unroll"), ("parallel", "parallel"))

GPU_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
            "threadIdx.z", "vthread")

BUFFER_FIELDS = ("access_read", "access_write", "access_rw", "bytes", "unique_bytes", "lines",
                 "unique_lines", "reuse_loop_multiple_read", "reuse_serial_multiple_rw",
                 "reuse_none", "reuse_dis_iter", "reuse_dis_bytes", "reuse_ct",
                 "bytes_d_reuse_ct", "unique_bytes_d_reuse_ct", "lines_d_reuse_ct",
                 "unique_lines_d_reuse_ct", "stride")

BUFFERS_PER_STORE = 5
CURVE_SAMPLES = 10

ALLOC = ("alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod")
OUTER = ("outer_prod", "num_loops", "auto_unroll_max_step")
TARGET = ("l1_traffic", "l2_traffic", "l3_traffic", "vec_lane_fill", "parallel_balance",
          "parallel_per_core", "inner_len", "vector_code", "vector_dense", "inner_dense",
          "inner_store_invariant", "body_statements", "body_store_elems", "body_load_elems",
          "guarded", "est_compute_cycles", "est_memory_cycles", "est_cycles")


def _build() -> tuple:
    names: list = []
    groups: dict = {}

    def add(group: str, items) -> None:
        start = len(names)
        names.extend(items)
        groups[group] = slice(start, len(names))

    add("arith", ARITH)
    for prefix, group in LOOP_KIND_GROUPS:
        add(group, [f"{prefix}_num", f"{prefix}_prod", f"{prefix}_len"]
            + [f"{prefix}_pos_{p}" for p in POSITIONS])
    add("gpu", ["is_gpu"] + [f"{t}_len" for t in GPU_TAGS])
    add("buffers", [f"buf{b}.{f}" for b in range(BUFFERS_PER_STORE) for f in BUFFER_FIELDS])
    add("intensity", [f"arith_intensity_{k}" for k in range(CURVE_SAMPLES)])
    add("alloc", ALLOC)
    add("outer", OUTER)
    add("target", TARGET)
    add("codegen", CODEGEN)
    add("gpu_resources", GPU_RESOURCES)
    return tuple(names), groups


NAMES, GROUPS = _build()
