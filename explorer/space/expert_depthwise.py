"""The expert schedule of a depthwise convolution (NCHW, one filter per channel).

A point of the default CPU design space, as the other expert schedules
(``explorer.space.expert``)::

    trace = depthwise_trace(ops.depthwise_conv2d(1, 144, 56, 56, stride=2, padding=1))
    sch = DesignSpace(wl, "llvm").apply(trace)     # = expert_schedule(wl)

Each channel is a small 2-d stencil, 9 multiply-adds per output for a 3x3 filter and
no reduction across channels, so the kernel is bound by how it reads the input rows:

- the register tile is ``rows`` output rows x ``q3`` output columns of one channel,
  vectorized along the columns (``q3`` up to 4 vectors, the whole row where it fits),
  the accumulators in the ``local`` write cache at tile level 2, the 3 x 3 window
  unrolled. With stride 2 a column vector reads every other input element: the LLVM
  backend loads it as two contiguous vectors and a deinterleaving shuffle
  (``backends.llvm.strided``), not a gather;
- (``q3``, ``rows``) the most elements per tile whose ``rows`` x vectors of a row stay
  within the accumulator budget, at most 8 rows, the wider row on a tie;
- the rows innermost (tile level 3, inside the window loops, ``p3``), unless the tile has
  at most ``MAX_FUSED`` elements: the vectorizer then fuses ``p3 x q3`` into one loop of
  lanes indexed ``[f // q3, f % q3]``. That loop ran as a scalar loop until the LLVM
  backend's lane-conflict check read the split (``analysis.lane_stride``; MobileNet-V2
  D10, a 7 x 7 tile, one core: 0.77-2.7 ms against 0.05 ms); now it is vector code, and
  the two placements measured mixed (one core, interleaved, load 2-4: D10 0.026 ms at
  level 3 against 0.045 at level 2, D9 0.058 against 0.042, D1-D8 within 3%), so such
  a tile keeps its rows at level 2 (``p2``, outside the window loops) and the search
  tries both: on an AVX2 target D1, 4 rows x 16 columns, 0.55 ms against 0.96 with one
  row (PyTorch 1.5). Where both work level 3 measured faster (D7, 7 x 14: 0.03 ms
  against 0.06);
- where that leaves a small tile, ``c3`` = 4 or 2 channels in it, unrolled;
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
MAX_ROWS = 8             # rows per register tile
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
    best = (0, 0, 1, 1)     # (elements, q3, p2, vectors): the most elements, the wider row
    for q3 in range(1, min(Q, MAX_ROW_VECTORS * lanes) + 1):
        if Q % q3:
            continue
        vectors = budget.vectors(q3)
        p2 = _pick(P, tuple(range(min(MAX_ROWS, budget.acc // vectors), 0, -1)), limit=1)
        best = max(best, (p2 * q3, q3, p2, vectors))
    _, q3, p2, vectors = best
    c3 = _pick(C, tuple(c for c in (4, 2) if c * p2 * vectors <= budget.acc // 2), limit=1)
    rows = [p2, 1] if p2 * q3 <= MAX_FUSED else [1, p2]     # at level 2 or 3
    return {"n": [N, 1, 1, 1], "c": [C // c3, 1, 1, c3], "p": [P // p2, 1] + rows,
            "q": [Q // q3, 1, 1, q3], "ry": [1, p["R"]], "rx": [1, p["S"]],
            PADDING: INLINE}
