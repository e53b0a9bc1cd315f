"""Interactive latency of the ScheduleExplorer: apply a primitive and re-render.

Times one step as a button press runs it: the view-model copies the schedule
and applies the primitive, then the loop nest HTML, the loop tree, the
primitive panel, the trace and the run bar re-render. By default the timing
runs inside a real IPython kernel (started with jupyter_client), so every
widget update is serialized and sent as a comm message as in JupyterLab; only
the browser's own painting is not counted. Each sequence of steps is replayed
``--repeats`` times from the naive schedule.

    python benchmarks/widget_latency.py               # gemm 512^3 and ResNet-18 conv2d C6
    python benchmarks/widget_latency.py --pictures    # the pictures' redraw after each step
    python benchmarks/widget_latency.py --in-process  # no kernel: no comm messages

Exit status 1 if a workload's median exceeds the 100 ms budget.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import matplotlib

matplotlib.use("Agg")

from explorer import ops  # noqa: E402
from widgets import ScheduleExplorer  # noqa: E402

BUDGET_MS = 100.0

GEMM_STEPS = [
    ("split i", lambda ex: ex.split("i", [None, 8])),
    ("split j", lambda ex: ex.split("j", [None, 64])),
    ("reorder", lambda ex: ex.reorder("i_0", "j_0", "k", "i_1", "j_1")),
    ("split j_1", lambda ex: ex.split("j_1", [None, 16])),
    ("vectorize", lambda ex: ex.vectorize("j_1_1")),
    ("unroll", lambda ex: ex.unroll("i_1")),
    ("parallel", lambda ex: ex.parallel("i_0")),
    ("select loop", lambda ex: ex.select(loop="k")),
    ("illegal step", lambda ex: not ex.vectorize("k")),
    ("undo", lambda ex: ex.undo()),
]

CONV_STEPS = [
    ("compute_inline pad", lambda ex: ex.compute_inline("pad")),
    ("split k", lambda ex: ex.split("k", [None, 16])),
    ("split q", lambda ex: ex.split("q", [None, 7])),
    ("reorder", lambda ex: ex.reorder("k_0", "p", "q_0", "rc", "ry", "rx", "q_1", "k_1")),
    ("vectorize", lambda ex: ex.vectorize("k_1")),
    ("parallel", lambda ex: ex.parallel("n1")),
    ("cache_write", lambda ex: ex.cache_write("conv", 0, "local")),
    ("reverse_compute_at", lambda ex: ex.reverse_compute_at("conv_local", "q_0")),
    ("select loop", lambda ex: ex.select(loop="rc")),
    ("undo", lambda ex: ex.undo()),
]


def measure(wl, steps, repeats: int, pictures: bool) -> dict:
    """Per step: list of milliseconds over ``repeats`` replays. With ``pictures``, the
    time of redrawing the four pictures after the step (in JupyterLab that redraw
    follows the step on the kernel's event loop; the step itself does not wait)."""
    ex = ScheduleExplorer(wl, target="llvm")
    times: dict = {name: [] for name, _ in steps}
    for _ in range(repeats):
        while ex.undo():
            pass
        ex.select(loop=ex.state.loops()[0].name)
        for name, step in steps:
            t0 = time.perf_counter()
            ok = step(ex)
            if pictures:
                t0 = time.perf_counter()
                ex.figure.render()
            times[name].append((time.perf_counter() - t0) * 1e3)
            if ok is False:
                raise RuntimeError(f"{wl}: step {name!r} failed: {ex.error}")
    return times


def report(title: str, times: dict) -> float:
    every = [t for ts in times.values() for t in ts]
    med = statistics.median(every)
    print(f"\n{title}")
    print(f"  {'step':<22}{'median ms':>10}{'max ms':>9}")
    for name, ts in times.items():
        print(f"  {name:<22}{statistics.median(ts):>10.1f}{max(ts):>9.1f}")
    p90 = sorted(every)[int(0.9 * (len(every) - 1))]
    print(f"  {'all steps':<22}{med:>10.1f}   (p90 {p90:.1f} ms, {len(every)} steps)")
    return med


def in_kernel(argv: list) -> int:
    """Run this script with ``--in-process`` inside a fresh IPython kernel."""
    from pathlib import Path

    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="python3")
    root = Path(__file__).resolve().parent.parent
    lines: list = []

    def hook(msg):
        if msg["msg_type"] == "stream":
            print(msg["content"]["text"], end="")
            lines.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            print("\n".join(msg["content"]["traceback"]))
            lines.append("ERROR")
    try:
        kc.execute_interactive(
            f"import os, sys; os.chdir({str(root)!r}); sys.path.insert(0, {str(root)!r})\n"
            f"%run benchmarks/widget_latency.py --in-process {' '.join(argv)}",
            output_hook=hook, timeout=600)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    text = "".join(lines)
    return 0 if ("within the" in text or "to redraw" in text) and "ERROR" not in text else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--pictures", action="store_true", help="redraw the pictures too")
    ap.add_argument("--in-process", action="store_true",
                    help="time here, without a kernel (no comm messages are sent)")
    args = ap.parse_args(argv)
    if not args.in_process:
        rest = [f"--repeats={args.repeats}"] + (["--pictures"] if args.pictures else [])
        return in_kernel(rest)
    where = "in a kernel (comm messages sent)" if _has_kernel() else "in-process, no kernel"
    print(f"timing {where}")
    cases = [("gemm 512x512x512", ops.gemm(512, 512, 512), GEMM_STEPS),
             ("conv2d ResNet-18 C6 (1x128x28x28, 128 3x3, pad 1)", ops.resnet18_conv("C6"),
              CONV_STEPS)]
    worst = 0.0
    for title, wl, steps in cases:
        med = report(title + (": pictures redraw" if args.pictures else ""),
                     measure(wl, steps, args.repeats, args.pictures))
        worst = max(worst, med)
    if args.pictures:
        print(f"\nworst median {worst:.1f} ms to redraw the pictures (they follow the step on "
              "the kernel's event loop; the step's budget does not include them)")
        return 0
    verdict = "within" if worst <= BUDGET_MS else "OVER"
    print(f"\nworst median {worst:.1f} ms: {verdict} the {BUDGET_MS:.0f} ms budget")
    return 0 if worst <= BUDGET_MS else 1


def _has_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


if __name__ == "__main__":
    sys.exit(main())
