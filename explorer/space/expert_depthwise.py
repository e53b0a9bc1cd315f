"""The expert schedule of a depthwise convolution (NCHW, one filter per channel).

A point of the default CPU design space, as the other expert schedules
(``explorer.space.expert``)::

    trace = depthwise_trace(ops.depthwise_conv2d(1, 144, 56, 56, stride=2, padding=1))
    sch = DesignSpace(wl, "llvm").apply(trace)     # = expert_schedule(wl)

Each channel is a small 2-d stencil, 9 multiply-adds per output for a 3x3 filter and
no reduction across channels, so the kernel is bound by how it reads the input rows:

- the register tile is ``p3`` output rows x ``q3`` output columns of one channel,
  vectorized along the columns (``q3`` up to 4 vectors, the whole row where it fits),
  the accumulators in the ``local`` write cache at tile level 2, the 3 x 3 window
  unrolled around it. With stride 2 a column vector reads every other input element:
  the LLVM backend loads it as two contiguous vectors and a deinterleaving shuffle
  (``backends.llvm.strided``), not a gather;
- ``p3`` rows so that ``p3`` x the vectors of a row stay within the accumulator
  budget, at most half of it (8 rows), and more than ``MAX_FUSED`` elements in all (or one
  row): the vectorizer fuses a tile of at most that many elements into one loop of
  ``p3 * q3`` lanes indexed ``[f // q3, f % q3]``, which the LLVM backend's lane-conflict
  check (``analysis.vectorize_blocker``) cannot prove independent, so it runs as a
  scalar loop (MobileNet-V2 D10, 7 x 7 tile, one core: 0.77-2.7 ms against 0.05 ms with
  one row per tile);
- where that leaves a small tile (one row of a narrow layer: 7 columns), ``c3`` = 4 or 2
  channels in it, unrolled (MobileNet-V2 D9, one core: 0.20 ms with one channel per
  tile, 0.04 with four; PyTorch 0.24);
- every channel block and row block a parallel task (the outer tile level);
- the padding read inline through its select (masked loads at the border), no padded
  copy: the copy is a second parallel pass over the input, as long as the
  convolution itself (MobileNet-V2 D4, one core: 0.49 ms with the copy, 0.16 without;
  PyTorch 0.78).
"""
from __future__ import annotations

from ..schedule import Trace
from .design_space import DesignSpace
from .expert import INLINE, PADDING, _Budget, _pick, _pair, _with_decisions, \
    sketch_with_write_cache

MAX_ROW_VECTORS = 4      # a register row of at most 4 vectors (q3)
MAX_FUSED = 64           # ParallelizeVectorizeUnroll's max_vectorize_extent on the CPU


def depthwise_trace(workload, target) -> Trace:
    """The expert trace of a ``depthwise_conv2d`` workload on a CPU ``target``."""
    p = dict(workload.params)
    space = DesignSpace(workload, target)
    trace = sketch_with_write_cache(space, 2, False)
    return _with_decisions(trace, space, depthwise_plan(p, _Budget.of(target)))


def depthwise_plan(p: dict, budget: _Budget) -> dict:
    """Iteration variable -> tile factors (see the module docstring)."""
    from ..ops import _out_size
    st, pad, dil = (_pair(p[k]) for k in ("stride", "padding", "dilation"))
    P = _out_size("depthwise_conv2d", "H", p["H"], p["R"], st[0], pad[0], dil[0])
    Q = _out_size("depthwise_conv2d", "W", p["W"], p["S"], st[1], pad[1], dil[1])
    P, Q, C, N = budget.pad(P), budget.pad(Q), budget.pad(p["C"]), budget.pad(p["N"])
    lanes = budget.lanes
    q3 = _pick(Q, (), limit=MAX_ROW_VECTORS * lanes)
    vectors = budget.vectors(q3)
    rows = tuple(r for r in range(min(P, budget.acc // 2), 1, -1)
                 if r * vectors <= budget.acc and r * q3 > MAX_FUSED)
    p3 = _pick(P, rows, limit=1)
    c3 = _pick(C, tuple(c for c in (4, 2) if c * p3 * vectors <= budget.acc // 2), limit=1)
    return {"n": [N, 1, 1, 1], "c": [C // c3, 1, 1, c3], "p": [P // p3, 1, 1, p3],
            "q": [Q // q3, 1, 1, q3], "ry": [1, p["R"]], "rx": [1, p["S"]],
            PADDING: INLINE}
