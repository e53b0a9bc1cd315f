"""Pictures of sampling and tuning, as plain matplotlib functions on an ``ax``.

Inputs are plain sequences (what the engine's events carry), so the same
functions draw a live dashboard, a saved log, or a figure for a paper.
"""
from __future__ import annotations

import numpy as np
from matplotlib.ticker import MaxNLocator


def best_so_far(values) -> np.ndarray:
    """Running maximum of ``values``; None (a failed trial) counts as no improvement."""
    out, best = [], np.nan
    for v in values:
        if v is not None and (np.isnan(best) or v > best):
            best = v
        out.append(best)
    return np.array(out, dtype=float)


def plot_best_so_far(ax, gflops, trials=None):
    """Best GFLOP/s found after each trial (a step line). Returns the curve."""
    curve = best_so_far(gflops)
    x = np.arange(len(curve)) if trials is None else np.asarray(trials)
    ax.step(x, curve, where="post", color="#1f77b4", lw=2)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial")
    ax.set_ylabel("best GFLOP/s so far")
    ax.set_title("best so far")
    ax.grid(alpha=0.3)
    return curve


def plot_predicted_vs_measured(ax, predicted, measured, rounds):
    """One point per candidate with a prediction and a measurement, coloured by round.
    Returns the number of points drawn."""
    pts = [(p, m, r) for p, m, r in zip(predicted, measured, rounds)
           if p is not None and m is not None]
    title = "predicted vs measured"
    if pts:
        p, m, r = (np.array(v, dtype=float) for v in zip(*pts))
        ax.scatter(p, m, c=r, cmap="viridis", s=18, vmin=0, vmax=max(1.0, r.max()))
        lo, hi = int(r.min()), int(r.max())
        title += (f"\n(colour: round {lo} to {hi}, dark to light)" if hi > lo
                  else f"\n(round {lo})")
    ax.set_xlabel("predicted score")
    ax.set_ylabel("measured GFLOP/s")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    return len(pts)


def plot_rank_accuracy(ax, rounds, accuracy, recall=None):
    """The cost model's pairwise rank accuracy per round (and top-k recall), with the
    0.5 line of a model that guesses. Returns the number of rounds drawn."""
    drawn = _accuracy_lines(ax, rounds, accuracy, recall, "round", "cost model rank accuracy")
    if len(rounds):
        ax.set_xlim(min(rounds) - 0.5, max(rounds) + 0.5)
    return drawn


def plot_accuracy_vs_samples(ax, samples, accuracy, recall=None):
    """Model accuracy as its training set grows. Returns the number of points drawn."""
    return _accuracy_lines(ax, samples, accuracy, recall, "training samples",
                           "accuracy as samples grow")


def _accuracy_lines(ax, xs, accuracy, recall, xlabel: str, title: str) -> int:
    """Rank accuracy (and top-k recall) over ``xs`` with the 0.5 chance line, on a 0-1
    axis: the picture both accuracy plots draw. Returns the accuracy points drawn."""
    pts = [(x, a) for x, a in zip(xs, accuracy) if a is not None]
    if pts:
        ax.plot(*zip(*pts), marker="o", color="#2ca02c", label="rank accuracy")
    rpts = [(x, a) for x, a in zip(xs, recall) if a is not None] if recall is not None else []
    if rpts:
        ax.plot(*zip(*rpts), marker="s", color="#ff7f0e", label="top-k recall")
    ax.axhline(0.5, color="grey", ls=":", lw=1, label="chance")
    ax.set_ylim(0, 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="best")
    return len(pts)


def plot_feature_importance(ax, importance, top: int = 12):
    """Horizontal bars of the ``top`` features by gain, most important on top, each
    named inside its bar (long names stay readable); ``importance`` is
    ``((name, gain), ...)``. Returns the names drawn, most important first."""
    items = sorted(importance, key=lambda x: -x[1])[:top]
    names = [n for n, _ in items]
    ys = np.arange(len(items))[::-1]
    ax.barh(ys, [g for _, g in items], color="#d1c4e9", edgecolor="#9467bd")
    for y, name in zip(ys, names):
        ax.text(0, y, " " + name, va="center", ha="left", fontsize=8)
    if not items:
        ax.text(0.5, 0.5, "no feature importance yet\n(the model reports it once trained)",
                ha="center", va="center", transform=ax.transAxes, fontsize=9, color="grey")
    ax.set_yticks([])
    ax.set_xlabel("gain")
    ax.set_title(f"feature importance (top {len(items)})")
    return names


def plot_histogram(ax, values, bins: int = 20, xlabel: str = "GFLOP/s"):
    """Distribution of measured (or predicted) values; None entries are skipped.
    Returns the counts per bin."""
    vals = [v for v in values if v is not None]
    counts, _, _ = ax.hist(vals, bins=bins, color="#1f77b4", alpha=0.8) if vals else ([], 0, 0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("samples")
    ax.set_title(f"distribution of {len(vals)} samples")
    return np.asarray(counts)


def plot_decision_scatter(ax, decision, values, name: str = "decision",
                          ylabel: str = "GFLOP/s", highlight: int | None = None):
    """Performance against one decision of the design space (a tile factor...).
    Returns the number of points drawn."""
    pts = [(d, v) for d, v in zip(decision, values) if d is not None and v is not None]
    if pts:
        ax.scatter(*zip(*pts), s=22, alpha=0.7, color="#1f77b4")
    if highlight is not None and decision[highlight] is not None and values[highlight] is not None:
        ax.scatter([decision[highlight]], [values[highlight]], s=90, facecolors="none",
                   edgecolors="#d62728", linewidths=2)
    ax.set_xlabel(name)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{ylabel} against {name}")
    ax.grid(alpha=0.3)
    return len(pts)
