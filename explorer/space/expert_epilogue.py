"""Expert schedules of the fused epilogues: conv2d + bias + ReLU and gemm + bias + GELU.

Each is a point of the fused workload's default CPU design space, as the other expert
schedules (``explorer.space.expert``) are, and is chosen the same way::

    trace = epilogue_trace(ops.gemm_bias_gelu(128, 3072, 768))
    sch = DesignSpace(wl, "llvm").apply(trace)     # = expert_schedule(wl)

- The main nest (the ``conv`` or ``gemm`` block) takes the expert plan of its own
  operator (``conv2d`` NCHW, ``gemm``): the same tile decisions, read from
  ``expert._tile_plan`` / ``expert._conv_channel``, not copied, so the fused op follows
  any change to them and the target's vector width and registers.
- The epilogue (``bias_add``, inlined into the activation by ``AutoInline``) is the
  consumer that multi-level tiling fuses at tile level 2 (``reverse_compute_at``, in
  place of the write cache): it runs on the register tile as soon as the tile's
  reduction ends, and lowering compacts the intermediate ``conv`` / ``gemm`` buffer to
  the tile. The epilogue then costs its arithmetic and no memory traffic: the output is
  stored once, where the unfused sequence writes the product, reads it back for the
  bias, writes it, and reads and writes it again for the activation.
- A conv takes the channel-vectorized sketch (2 vectors of output channels x a few
  columns, see ``expert._conv_channel``) where the space offers one with the epilogue
  fused, else the sketch vectorized over the output columns (``expert._conv_nchw``).
  The default rules offer it (``MultiLevelTiling.add_vector_channel`` fuses one
  elementwise consumer where the write cache would go); the column-vectorized conv ran at
  about 0.6x the plain conv2d's channel-vectorized expert (ResNet-18 C2, C6, one core),
  the channel sketch with the epilogue at 0.9-1.0x (``benchmarks/fused_epilogue.py``).
"""
from __future__ import annotations

from ..errors import SpaceError
from ..schedule import Trace
from ..target import as_target
from .design_space import DesignSpace
from .expert import (_Budget, _conv_channel, _tile_plan, _with_decisions,
                     sketch_with_write_cache)

EPILOGUE_OPS = {"conv2d_bias_relu": "conv2d", "gemm_bias_gelu": "gemm"}
EPILOGUE_LEVEL = 2    # the tile level whose last loop holds the register tile's accumulators


def epilogue_trace(workload, target="llvm") -> Trace:
    """The expert schedule of a fused workload (``conv2d_bias_relu``, ``gemm_bias_gelu``)
    as a trace of its default space on ``target``, every decision made."""
    target = as_target(target)
    name = getattr(workload, "name", None)
    if name not in EPILOGUE_OPS:
        raise SpaceError(f"no fused-epilogue expert schedule for "
                         f"{getattr(workload, 'key', workload)!r}: they exist for "
                         f"{', '.join(EPILOGUE_OPS)} (expert_trace covers the plain operators)")
    if target.is_gpu:
        raise SpaceError("the fused-epilogue expert schedules are written for the llvm (CPU) "
                         "target; for cuda sample DesignSpace(workload, 'cuda') or tune")
    space = DesignSpace(workload, target)
    main = main_nest(workload)
    if main.name == "conv2d":
        try:   # the output channel vectorized, when the space offers it with the epilogue
            trace = sketch_with_write_cache(space, EPILOGUE_LEVEL, packed=True, channel=True)
            return _with_decisions(trace, space,
                                   _conv_channel(dict(main.params), _Budget.of(target)))
        except SpaceError:
            pass
    plan = _tile_plan(main, target)
    plan.pop("_cache_level", None)    # the epilogue goes on the register tile, whatever
    packed = plan.pop("_packed", True)    # level the plain operator caches at
    pack_level = plan.pop("_pack_level", 1)
    return _with_decisions(_epilogue_sketch(space, packed, pack_level), space, plan)


def main_nest(workload):
    """The plain operator whose loop nest the fused ``workload`` extends: ``conv2d``
    (NCHW) or ``gemm`` with the same shape and dtype."""
    from .. import ops
    name = EPILOGUE_OPS[workload.name]
    return ops.get(name, dtype=workload.dtype, **dict(workload.params))


def _epilogue_sketch(space, packed: bool, pack_level: int = 1) -> Trace:
    """The sketch with the epilogue fused at the register tile's level, with the packed
    input where the space has one (a gemm's B panel, at tile level ``pack_level``), else
    without."""
    if packed:
        try:
            return sketch_with_write_cache(space, EPILOGUE_LEVEL, packed=True,
                                           pack_level=pack_level)
        except SpaceError:
            pass
    return sketch_with_write_cache(space, EPILOGUE_LEVEL, packed=False)
