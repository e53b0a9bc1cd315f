"""Pictures of schedules, as plain matplotlib functions that draw on an ``ax``.

Usable without widgets (notebooks, papers): each takes an ``Axes`` and the
thing to draw, draws, and returns the numbers it drew so a caller (or a
test) can check them. Tuning pictures live in :mod:`widgets.tuning_plots`.

    fig, ax = plt.subplots()
    plot_tiling(ax, sch)                 # how the loops cut the 2-D output
"""
from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from explorer.measure import intensity
from explorer.target import as_target
from explorer.ir.footprint import footprints
from explorer.ir.loop_tree import block_infos, loop_infos
from explorer.ir.stmt import PrimFunc
from explorer.ir.tiling import tiling

LEVEL_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")
KIND_COLORS = {"serial": "#9e9e9e", "parallel": "#2e7d32", "vectorized": "#1565c0",
               "unrolled": "#ef6c00", "thread": "#6a1b9a"}


def func_of(obj) -> PrimFunc:
    """The PrimFunc behind a Schedule, Workload or PrimFunc (what the pictures draw)."""
    func = obj if isinstance(obj, PrimFunc) else getattr(obj, "func", None)
    if not isinstance(func, PrimFunc):
        raise TypeError(f"expected a Schedule, Workload or PrimFunc, got {type(obj).__name__}")
    return func


def plot_tiling(ax, obj, block: str | None = None, dims: tuple = (-2, -1),
                max_rects: int = 4096, zoom: int | None = None, legend: str = "right"):
    """Draw how the loops around ``block`` cut two output dimensions into tiles.

    Level 0 shows every tile (alternate tiles shaded); each deeper level shows
    the tiles inside the first tile of the level above (the picture stays
    readable at any size). GPU levels (blockIdx, vthread, threadIdx) colour
    each block or thread. ``zoom=n`` frames the first tile of level ``n``;
    ``legend`` is "right" (outside), "below" or "none".
    Returns the :class:`explorer.ir.tiling.Tiling`.
    """
    t = tiling(func_of(obj), block, dims)
    rows, cols = t.shape
    ax.add_patch(Rectangle((0, 0), cols, rows, facecolor="#f4f4f4", edgecolor="black", lw=1))
    gpu = {"block", "vthread", "thread"}
    for n, level in enumerate(t.levels):
        color = LEVEL_COLORS[n % len(LEVEL_COLORS)]
        rects = _boxes(level.rects[:max_rects])
        if level.name in gpu:
            faces = [_cycle(u) for u in level.labels[:max_rects]]
            coll = PolyCollection(rects, facecolors=faces, edgecolors=color, alpha=0.55,
                                  linewidths=1.2)
        else:
            alpha = 0.18 + 0.1 * n
            faces = [_shade(color, alpha * (1.6 if k % 2 else 1.0)) for k in range(len(rects))]
            coll = PolyCollection(rects, facecolors=faces, edgecolors=color,
                                  linewidths=max(0.4, 2.0 - 0.6 * n))
        ax.add_collection(coll)
        ax.plot([], [], color=color, lw=3, label=_level_label(level))
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    if zoom is not None and zoom < len(t.levels) and t.levels[zoom].rects:
        r, c, h, w = t.levels[zoom].rects[0]
        ax.set_xlim(c - 0.5, c + w + 0.5)
        ax.set_ylim(r + h + 0.5, r - 0.5)
    ax.set_aspect("equal")
    ax.set_xlabel(t.dims[1])
    ax.set_ylabel(t.dims[0])
    ax.set_title(f"tiling of {t.block}'s output ({rows} x {cols})")
    if legend == "right":
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    elif legend == "below":
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8, frameon=False)
    return t


def _level_label(level) -> str:
    h, w = (level.rects[0][2], level.rects[0][3]) if level.rects else (0, 0)
    return f"{level.name}: {level.count} tiles of {h}x{w}"


def _boxes(rects) -> np.ndarray:
    """(n, 4, 2) corner arrays of ``(row, col, height, width)`` rectangles (x = col)."""
    a = np.asarray(rects, dtype=float).reshape(-1, 4)
    r, c, h, w = a.T
    return np.stack([np.stack([c, r], 1), np.stack([c + w, r], 1),
                     np.stack([c + w, r + h], 1), np.stack([c, r + h], 1)], 1)


def _shade(color: str, alpha: float) -> tuple:
    from matplotlib.colors import to_rgba
    return to_rgba(color, min(1.0, alpha))


def _cycle(k: int):
    import matplotlib
    return matplotlib.colormaps["tab20"](k % 20)


def plot_loop_tree(ax, obj):
    """Draw the loop tree: one box per loop (extent, kind) and per block, indented by
    depth and joined to its parent. Returns the number of nodes drawn."""
    func = func_of(obj)
    loops = loop_infos(func)
    rows: list = []                       # (depth, text, color, parent row)
    by_name: dict = {}
    for lp in loops:
        kind = lp.thread if lp.kind == "thread" else lp.kind
        by_name[lp.name] = len(rows)
        rows.append((lp.depth, f"{lp.name}  [{lp.extent}]  {kind}", KIND_COLORS[lp.kind],
                     by_name.get(lp.parent)))
        for b in _blocks_directly_under(lp, loops):
            rows.append((lp.depth + 1, f"block {b}", "#fdd835", by_name[lp.name]))
    for b in block_infos(func):
        if not b.loops:
            rows.append((0, f"block {b.name}", "#fdd835", None))
    segs = []
    for n, (depth, text, color, parent) in enumerate(rows):
        ax.text(depth, -n, text, va="center", ha="left", fontsize=9, family="monospace",
                bbox=dict(boxstyle="round,pad=0.25", facecolor=color, alpha=0.35,
                          edgecolor=color))
        if parent is not None:
            pd = rows[parent][0]
            segs.append([(pd + 0.15, -parent - 0.3), (pd + 0.15, -n), (depth - 0.05, -n)])
    ax.add_collection(LineCollection(segs, colors="#555555", linewidths=0.8))
    depth = max((r[0] for r in rows), default=0)
    ax.set_xlim(-0.3, depth + 4)
    ax.set_ylim(-len(rows) + 0.5, 0.7)
    ax.axis("off")
    ax.set_title("loop tree (extent, kind)")
    return len(rows)


def _blocks_directly_under(lp, loops) -> list:
    inner = {b for x in loops if x.parent == lp.name for b in x.blocks}
    return [b for b in lp.blocks if b not in inner]


def plot_memory_footprint(ax, obj, target=None, block: str | None = None):
    """Bars: bytes each buffer of ``block`` touches in one run of each loop (outermost
    left), against the target's memory levels (default: this host's): L1/L2/L3 on a
    CPU; on a cuda target the GPU's registers per thread, shared memory per block and,
    above them, global memory (thread-bound loops carry their tag). Returns the
    footprints (:func:`explorer.ir.footprint.footprints`)."""
    target = as_target(target or "llvm")
    func = func_of(obj)
    fps = footprints(func, block)
    names = list(fps[0].bytes) if fps else []
    x = np.arange(len(fps))
    bottom = np.zeros(len(fps))
    for n, name in enumerate(names):
        vals = np.array([fp.bytes[name] for fp in fps], dtype=float)
        ax.bar(x, vals, bottom=bottom, color=LEVEL_COLORS[n % len(LEVEL_COLORS)], label=name)
        bottom += vals
    levels = memory_levels(target)
    for label, size, style in levels:
        ax.axhline(size, color="black", ls=style, lw=1)
        ax.text(len(fps) - 0.5, size, f" {label} {_human(size)}", va="bottom", ha="right",
                fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(bottom=max(1.0, min((fp.total for fp in fps), default=2) / 2))
    if target.is_gpu:
        top = max(ax.get_ylim()[1], levels[-1][1] * 4)
        ax.set_ylim(top=top)
        ax.axhspan(levels[-1][1], top, color="#eeeeee", zorder=0)
        ax.text(len(fps) - 0.5, top / 1.5, "global memory ", va="top", ha="right", fontsize=8,
                color="#555555")
    _byte_ticks(ax.yaxis, ax.get_ylim())
    tags = {lp.name: _short_tag(lp.thread) for lp in loop_infos(func) if lp.kind == "thread"}
    ax.set_xticks(x, [f"{fp.loop}\n[{fp.extent}]" + (f"\n{tags[fp.loop]}" if fp.loop in tags
                                                     else "") for fp in fps], fontsize=8)
    ax.set_ylabel("bytes per run of the loop")
    ax.set_title("memory footprint per loop level" + (" (GPU levels)" if target.is_gpu else ""))
    ax.legend(fontsize=8)
    return fps


def _short_tag(tag: str) -> str:
    return tag.replace("blockIdx", "blk").replace("threadIdx", "thr").replace("vthread", "vthr")


def memory_levels(target) -> list:
    """(label, bytes, line style) of the memory levels a footprint is set against: the
    caches of a CPU target; a cuda target's register file of one thread (4-byte
    registers) and shared memory of one block (global memory lies above both)."""
    target = as_target(target)
    if target.is_gpu:
        return [("registers/thread", 4 * target.max_registers_per_thread, ":"),
                ("shared/block", target.max_shared_memory_per_block, "--")]
    return [("L1", target.l1_bytes, ":"), ("L2", target.l2_bytes, "--"),
            ("L3", target.l3_bytes, "-.")]


def plot_thread_map(ax, tmap, block: int = 0):
    """The output coloured by the block that computes each element, with the threads of
    ``block`` outlined and shaded inside it (``tmap``: an
    ``explorer.backends.cuda.thread_map.ThreadMap``, read from the lowered program).
    A buffer of more than two dimensions shows its last two (the others at 0).
    Returns ``{"blocks": colours drawn, "threads": thread ids inside the block,
    "box": the block's (row0, col0, row1, col1)}``."""
    from matplotlib.colors import ListedColormap
    bid, tid = tmap.block_id, tmap.thread_id
    while bid.ndim > 2:
        bid, tid = bid[0], tid[0]
    if bid.ndim == 1:
        bid, tid = bid[None, :], tid[None, :]
    rows, cols = bid.shape
    colors = ListedColormap([_cycle(k) for k in range(20)])
    shown = np.ma.masked_where(bid < 0, bid % 20)
    ax.imshow(shown, cmap=colors, vmin=-0.5, vmax=19.5, interpolation="nearest",
              extent=(0, cols, rows, 0), alpha=0.45, aspect="equal")
    mine = bid == block
    out = {"blocks": int(np.unique(bid[bid >= 0]).size), "threads": [], "box": None}
    if mine.any():
        r, c = np.nonzero(mine)
        r0, r1, c0, c1 = r.min(), r.max() + 1, c.min(), c.max() + 1
        out["box"] = (int(r0), int(c0), int(r1), int(c1))
        sub = np.where(mine, tid, -1)[r0:r1, c0:c1]
        out["threads"] = sorted(int(t) for t in np.unique(sub[sub >= 0]))
        ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, fill=False, edgecolor="black",
                               lw=2.2))
        small = (r1 - r0) * (c1 - c0) * 24 < rows * cols
        target = ax.inset_axes([0.5, 0.03, 0.47, 0.47]) if small else ax
        _draw_threads(target, sub, r0, c0, r1, c1)
        if small:
            target.set_title(f"block {tmap.block_coords(block)} enlarged", fontsize=8)
            target.tick_params(labelsize=7)
            target.set_facecolor("white")
            target.set_zorder(5)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_xlabel(f"{tmap.buffer} column")
    ax.set_ylabel(f"{tmap.buffer} row")
    ax.set_title(f"who computes {tmap.buffer}: {tmap.num_blocks} blocks x "
                 f"{tmap.threads_per_block} threads (colour: block;\noutlined: the threads of "
                 f"block {tmap.block_coords(block)}, numbered by linear threadIdx)", fontsize=9)
    return out


def _draw_threads(ax, sub, r0, c0, r1, c1) -> None:
    """One block's threads: shaded by thread id, outlined, numbered where they fit."""
    from matplotlib.colors import ListedColormap
    tcolors = ListedColormap([_cycle(2 * k + 1) for k in range(10)])
    ax.imshow(np.ma.masked_less(sub % 10, 0), cmap=tcolors, vmin=-0.5, vmax=9.5,
              interpolation="nearest", extent=(c0, c1, r1, r0), aspect="equal", alpha=0.8)
    ax.add_collection(LineCollection(_edges(sub, r0, c0), colors="black", linewidths=0.6))
    ids = np.unique(sub[sub >= 0])
    if len(ids) <= 256:
        size = 7 if len(ids) <= 64 else 5
        for t in ids:
            rr, cc = np.nonzero(sub == t)
            ax.text(c0 + (cc.min() + cc.max() + 1) / 2, r0 + (rr.min() + rr.max() + 1) / 2,
                    str(int(t)), ha="center", va="center", fontsize=size)
    ax.set_xlim(c0, c1)
    ax.set_ylim(r1, r0)


def _edges(ids: np.ndarray, r0: int, c0: int) -> list:
    """Segments between neighbouring cells of different ids (and around the owned cells)."""
    pad = np.pad(ids, 1, constant_values=-1)
    segs = []
    vr, vc = np.nonzero(pad[1:-1, :-1] != pad[1:-1, 1:])       # vertical edges
    for r, c in zip(vr, vc):
        if pad[r + 1, c] >= 0 or pad[r + 1, c + 1] >= 0:
            segs.append([(c0 + c, r0 + r), (c0 + c, r0 + r + 1)])
    hr, hc = np.nonzero(pad[:-1, 1:-1] != pad[1:, 1:-1])       # horizontal edges
    for r, c in zip(hr, hc):
        if pad[r, c + 1] >= 0 or pad[r + 1, c + 1] >= 0:
            segs.append([(c0 + c, r0 + r), (c0 + c + 1, r0 + r)])
    return segs


def plot_gpu_usage(ax, usage):
    """Bars per kernel: shared memory per block and registers per thread as a share of
    the target's limits (the line at 100%), from ptxas or estimated (hatched, said in the
    label). ``usage``: an ``explorer.space.gpu_usage.GpuUsage``. Returns the bars'
    ``(label, used, limit)``."""
    bars = []
    for k in usage.kernels:
        est = " (estimate)" if k.source != "ptxas" else ""
        bars.append((f"{k.kernel}\nshared/block", k.shared_bytes, k.shared_limit, "",
                     _human(k.shared_bytes) + " of " + _human(k.shared_limit)))
        bars.append((f"{k.kernel}\nregisters/thread{est}", k.registers, k.register_limit, est,
                     f"{k.registers} of {k.register_limit}"))
    y = np.arange(len(bars))[::-1]
    for yy, (label, used, limit, est, text) in zip(y, bars):
        share = used / limit if limit else 0.0
        color = "#c62828" if share > 1 else "#2e7d32" if share < 0.75 else "#ef6c00"
        ax.barh(yy, min(share, 1.5) * 100, color=color, alpha=0.75,
                hatch="//" if est else None, edgecolor="black" if est else color)
        ax.text(min(share, 1.5) * 100 + 2, yy, text, va="center", fontsize=8)
    ax.axvline(100, color="black", lw=1.2)
    ax.text(100, len(bars) - 0.4, " limit", fontsize=8, va="bottom")
    ax.set_yticks(y, [b[0] for b in bars], fontsize=8)
    ax.set_xlim(0, 160)
    ax.set_ylim(-0.6, len(bars) - 0.2)
    ax.set_xlabel("% of the target's limit")
    arch = getattr(usage.target, "arch", "") or "cuda"
    src = "estimated (no ptxas here)" if usage.estimated else "ptxas"
    ax.set_title(f"GPU resources per kernel on {arch} ({src})", fontsize=10)
    return [(b[0], b[1], b[2]) for b in bars]


def _byte_ticks(axis, lim) -> None:
    """Ticks at 1 B, 32 B, 1 KiB, 32 KiB... labelled in words (plain text: cheap to draw)."""
    ticks = [2.0 ** (10 * k) * m for k in range(5) for m in (1, 32)
             if lim[0] <= 2.0 ** (10 * k) * m <= lim[1]]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: _human(v)))
    axis.set_minor_locator(NullLocator())


def _plain_log_ticks(axis) -> None:
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_locator(NullLocator())


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}"
        n /= 1024
    return f"{n:.0f} TiB"


def roofline_point(workload, seconds: float, label: str = "kernel") -> tuple:
    """(label, arithmetic intensity in flop/byte, GFLOP/s) for a run of ``workload`` (or
    a Schedule of it); bytes are the compulsory traffic: every input read and output
    written once."""
    wl = getattr(workload, "workload", None) or workload
    return label, intensity(wl), wl.flops / seconds / 1e9


def plot_roofline(ax, points, roof):
    """The roofline (memory slope and compute roof) with kernels placed on it; the
    cache levels' slopes (``Roofline.cache_roofs``) thin and dotted above the memory's:
    a kernel whose bytes fit in a level is bounded by that level's slope.

    ``points``: ``(label, flop/byte, GFLOP/s)`` tuples, e.g. from :func:`roofline_point`;
    ``roof``: the host's measured ``explorer.measure.Roofline`` (peak GFLOP/s and
    bandwidth; ``ScheduleExplorer.roofline()`` or ``explorer.measure.measure_roofline()``).
    Returns the ridge intensity (flop/byte where the two roofs meet)."""
    peak, bandwidth, ridge = roof.peak_gflops, roof.bandwidth_gbs, roof.ridge
    xs = [p[1] for p in points] or [ridge]
    lo, hi = min(min(xs) / 4, ridge / 16), max(max(xs) * 4, ridge * 16)
    ax.plot([lo, ridge], [bandwidth * lo, peak], color="black", lw=2,
            label=f"memory {bandwidth:.3g} GB/s")
    ax.plot([ridge, hi], [peak, peak], color="black", lw=2, ls="--",
            label=f"compute {peak:.3g} GFLOP/s")
    for name, size, gbs in getattr(roof, "cache_roofs", ()):
        ax.plot([lo, peak / gbs], [gbs * lo, peak], color="gray", lw=1, ls=":",
                label=f"{name} {gbs:.3g} GB/s (data up to {_human(size)})")
    if points:
        ax.scatter([p[1] for p in points], [p[2] for p in points], s=40, zorder=3,
                   c=[LEVEL_COLORS[n % len(LEVEL_COLORS)] for n in range(len(points))])
        for n, (label, x, y) in enumerate(points):  # alternate above/below: points may meet
            ax.annotate(label, (x, y), textcoords="offset points",
                        xytext=(5, 4 if n % 2 == 0 else -11), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log_ticks(ax.xaxis)
    _plain_log_ticks(ax.yaxis)
    source = f"\nroof {roof.source}" if roof.source else ""
    ax.set_xlabel(f"arithmetic intensity (flop/byte){source}", fontsize=9)
    ax.set_ylabel("GFLOP/s")
    ax.set_title("roofline of this host")
    ax.legend(fontsize=8, loc="upper left")
    return ridge
