"""The default rules, postprocessors and mutators per target (MetaSchedule's defaults,
see ``shared/REFERENCE.md``), in their documented order."""
from __future__ import annotations

from .mutators import (MutateCategorical, MutateComputeLocation, MutateParallel,
                       MutateThreadBinding, MutateTileSize, MutateUnroll)
from .postprocs import (RewriteCooperativeFetch, RewriteParallelVectorizeUnroll,
                        RewriteReductionBlock, RewriteUnboundBlock, VerifyGPUCode)
from .rules import (AddRFactor, AutoBind, AutoInline, CrossThreadReduction, MemoryBoundTiling,
                    MultiLevelTiling, PackLayout, ParallelizeVectorizeUnroll,
                    RandomComputeLocation, ReuseConfig)

GPU_TILE_BINDS = ("blockIdx.x", "vthread.x", "threadIdx.x")


def cpu_multi_level_tiling() -> MultiLevelTiling:
    """SSRSRS with a write cache "may" at levels 1 and 2, as MetaSchedule, in ``local``
    scope (MetaSchedule: ``global``; on the CPU both lower the same way, compacted to the
    tile, and ``local`` says what it is for: accumulators held in registers).

    Not in MetaSchedule: a read cache "may" at level 1 for the input that feeds the
    vectorized dimension (B of a gemm), packing the panel a tile uses into contiguous
    memory. Measured on an AVX-512 host (1 thread, gemm 1024^3, register tile
    4 x 64):
    50 GFLOP/s unpacked, 150 packed (OpenBLAS: 120). Where that input is larger than the
    L2 (streamed from memory), also a read cache at level 3, the reduction block: the copy
    packs one block of B at a time, as the tile reaches it (BERT-base ffn_up 1.11x, ffn_down
    1.06-1.10x on one Intel Xeon core against the copy per task).

    Also not in MetaSchedule: where the last output dimension does not fill the vector
    registers (a conv's 7, 14, 28 or 56 columns for 16 lanes), one more sketch vectorizes
    the output channel, with the weight packed per task and the accumulators stored
    channel-last (``transform_layout``; see ``MultiLevelTiling.add_vector_channel``).
    Measured on one core (expert decisions, GFLOP/s): ResNet-18 C9 27 -> 151, C12 16 -> 77
    (PyTorch 120 and 66 in the same window)."""
    return MultiLevelTiling("SSRSRS", max_innermost_factor=64,
                            reuse_read=ReuseConfig("may", (1,), "global", operands="vector",
                                                   streamed_levels=(3,)),
                            reuse_write=ReuseConfig("may", (1, 2), "local"),
                            vector_channel=True)


def gpu_multi_level_tiling() -> MultiLevelTiling:
    return MultiLevelTiling("SSSRRSRS", tile_binds=GPU_TILE_BINDS, max_innermost_factor=64,
                            vector_load_lens=(1, 2, 3, 4, 8, 16),
                            reuse_read=ReuseConfig("must", (4,), "shared"),
                            reuse_write=ReuseConfig("must", (3,), "local"))


def default_rules(target) -> list:
    if target.is_gpu:
        return [gpu_multi_level_tiling(),
                AutoInline(into_producer=True, into_consumer=True, disallow_if_then_else=False,
                           require_injective=False, require_ordered=False, disallow_op=()),
                CrossThreadReduction((4, 8, 16, 32, 64, 128, 256, 512)),
                ParallelizeVectorizeUnroll(max_jobs_per_core=-1, max_vectorize_extent=-1,
                                           unroll_max_steps=(0, 16, 32, 64, 128, 256, 512,
                                                             1024)),
                AutoBind(max_threadblocks=256, thread_extents=(32, 64, 128, 256, 512, 1024))]
    return [AutoInline(into_producer=False, into_consumer=True, disallow_if_then_else=True,
                       require_injective=True, require_ordered=True, disallow_op=("exp",)),
            MemoryBoundTiling(),   # before AddRFactor: blocks it schedules are not rfactored again
            AddRFactor(max_jobs_per_core=16, max_innermost_factor=64),
            cpu_multi_level_tiling(),
            PackLayout(),   # the packed copy blocked by the register tile, where beyond L2
            ParallelizeVectorizeUnroll(max_jobs_per_core=16, max_vectorize_extent=64,
                                       unroll_max_steps=(0, 16, 64, 512), unroll_explicit=True),
            RandomComputeLocation()]


def default_postprocs(target) -> list:
    if target.is_gpu:
        return [RewriteCooperativeFetch(), RewriteUnboundBlock(max_threadblocks=256),
                RewriteParallelVectorizeUnroll(), RewriteReductionBlock(), VerifyGPUCode()]
    return [RewriteParallelVectorizeUnroll(), RewriteReductionBlock()]


def default_mutators(target) -> list:
    """(mutator, weight) pairs: MetaSchedule's, and ``MutateCategorical`` (not in
    MetaSchedule) for the rules' categorical choices that no other mutator changes. A
    mutator that finds nothing to change in a trace is set aside and another drawn by
    weight, so where a trace has no such choice (gemm, conv2d: their only categorical
    is the unroll step) the others are drawn with the same probabilities as before
    (not from the same random stream: a seed picks other children); where it has some (the
    memory-bound rule's prefetch distances, streaming stores, accumulator widths, and
    the streamed transposes' tile and run lengths) it takes 0.1 / 1.1 of the mutations
    on the CPU, the tile sizes still 0.9 / 1.1."""
    if target.is_gpu:
        return [(MutateTileSize(), 0.9), (MutateUnroll(), 0.08), (MutateThreadBinding(), 0.02),
                (MutateCategorical(), 0.02)]
    return [(MutateTileSize(), 0.9), (MutateComputeLocation(), 0.05), (MutateUnroll(), 0.03),
            (MutateParallel(), 0.02), (MutateCategorical(), 0.1)]
