"""Fused epilogues against PyTorch's unfused sequence and its fused paths (issue 17).

    python3 benchmarks/fused_epilogue.py --rounds 7 --json fused.json
    python3 benchmarks/fused_epilogue.py --tasks C2_bias_relu --db fused_db --trials 16

For each task of the ``fused`` suite (``explorer/data/fused.json``: ResNet-18 C2 and C6
with bias + ReLU, BERT-base's FFN up-projection with bias + GELU) the rows are:

- ``ours fused``: the expert schedule (``explorer.space.expert_epilogue``; the tuner's
  first trial), the epilogue computed on the register tile;
- ``ours tuned``: with ``--db``, the database's best (``--trials`` tuned into it first
  where it holds fewer);
- ``ours main``: our plain operator's expert alone (conv2d / gemm, no epilogue);
- ``numpy unfused``: the same sequence in numpy (im2col + sgemm or matmul, add, activation);
- ``torch main``: ``F.conv2d`` without bias / ``torch.matmul`` alone;
- ``torch unfused``: PyTorch running the sequence as three calls: the main op, ``add_``
  of the bias, the activation (``relu_``, ``F.gelu(approximate="tanh")``);
- ``torch bias``: its bias fused into the main op (``F.conv2d(X, W, b)`` / ``addmm``),
  the activation after;
- ``torch onednn``: oneDNN's fused kernel as PyTorch's inductor calls it
  (``torch.ops.mkldnn._convolution_pointwise`` / ``_linear_pointwise``, the weight
  laid out once beforehand).

Every contender runs in a process of its own (library threads spin after each call),
rounds are interleaved (``explorer.cli.bench.Bench``), each row is the median of its
samples, and every output is checked against the numpy reference first (the ``main``
rows against the plain operator's). ``vs ours`` is that row's time over ``ours fused``'s
(above 1: ours is faster). The issue's target: ours fused faster than torch unfused by at
least the epilogue's memory traffic, i.e. no slower than ``torch main`` alone. Without
PyTorch the torch rows are left out, saying so. Unset ``OPENBLAS_CORETYPE`` and
``OPENBLAS_L2_SIZE`` for numpy (the numpy worker does).

Measured (session 8, 2-core Zen 5 VM, ``--threads 1 --rounds 15``, load 9-11 from other
jobs, so only the ratios within a run mean anything; time over ours fused, medians):
gemm + bias + GELU: torch unfused 2.07-2.09, torch onednn 0.85-1.06, numpy 0.99-1.00,
our gemm alone 0.85-0.99 (the epilogue costs 5-10%: with the tanh inline since,
``backends/llvm/vecmath.tanh_f32``, level with libmvec on AVX-512 and 2.4x faster on a
non-host AVX2 target, 16 interleaved tanh chains on the register tile still spill).
The fused convs now get the channel-vectorized sketch
(``MultiLevelTiling.add_vector_channel`` fuses one elementwise consumer where the write
cache goes); before it they lost (C2 torch unfused 0.83, C6 0.61), with it they reach
parity: C2 1.01, C6 1.04, our conv2d alone 0.93 and 0.91.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from explorer import ops  # noqa: E402
from explorer.cli.bench import SETTLE_SECS, Bench, Contender  # noqa: E402
from explorer.measure.baselines import baseline_request, library_call  # noqa: E402
from explorer.measure.check import ReferenceCache  # noqa: E402
from explorer.measure.config import RunConfig  # noqa: E402
from explorer.measure.timing import time_repeats, timed  # noqa: E402
from explorer.space.expert import expert_schedule  # noqa: E402
from explorer.space.expert_epilogue import main_nest  # noqa: E402
from tune_cases import write_json  # noqa: E402

TORCH_ROWS = ("main", "unfused", "bias", "onednn")
_refs = ReferenceCache()


# ------------------------------------------------------------------ torch (in its worker)

def _pair(v) -> list:
    return list(v) if isinstance(v, (tuple, list)) else [v, v]


def _conv_calls(p: dict, X, W, b) -> dict:
    import torch
    import torch.nn.functional as F
    kw = dict(stride=_pair(p["stride"]), padding=_pair(p["padding"]),
              dilation=_pair(p["dilation"]))
    bias = b.view(1, -1, 1, 1)

    def unfused():
        c = F.conv2d(X, W, None, **kw)
        return c.add_(bias).relu_()
    return {"main": lambda: F.conv2d(X, W, None, **kw), "unfused": unfused,
            "bias": lambda: F.conv2d(X, W, b, **kw).relu_(),
            "onednn": lambda: torch.ops.mkldnn._convolution_pointwise(
                X, W, b, kw["padding"], kw["stride"], kw["dilation"], 1, "relu", [], "")}


def _gemm_calls(A, B, b) -> dict:
    import torch
    import torch.nn.functional as F
    weight = B.t().contiguous()     # a linear layer's (N, K) weight, laid out at load time

    def unfused():
        c = torch.matmul(A, B)
        return F.gelu(c.add_(b), approximate="tanh")
    return {"main": lambda: torch.matmul(A, B), "unfused": unfused,
            "bias": lambda: F.gelu(torch.addmm(b, A, B), approximate="tanh"),
            "onednn": lambda: torch.ops.mkldnn._linear_pointwise(A, weight, b, "gelu", [],
                                                                 "tanh")}


def torch_job(payload: dict, emit) -> dict:
    """Check and time one PyTorch way (``payload["row"]``) of a fused workload."""
    import torch
    torch.set_num_threads(int(payload["threads"]))
    cfg = RunConfig.from_json(payload["config"])
    wl = ops.get(payload["op"], **payload["params"])
    checked = main_nest(wl) if payload["row"] == "main" else wl
    ref = _refs.get(checked, cfg.seed)
    args = ref.fresh_args()
    inputs = [torch.from_numpy(a) for a in ref.fresh_args()[:len(wl.inputs)]]
    calls = (_conv_calls(dict(wl.params), *inputs) if wl.name == "conv2d_bias_relu"
             else _gemm_calls(*inputs))
    call = calls[payload["row"]]
    emit("running")
    try:
        first = timed(call)
        np.copyto(args[-1], call().numpy())
        err = ref.compare(args, cfg.rtol, cfg.atol)
    except Exception as e:  # an op this PyTorch lacks, or a wrong result: the row says so
        return {"error": f"torch {payload['row']}: {type(e).__name__}: {e}",
                "error_kind": "run", "flops": wl.flops}
    samples, number = time_repeats(call, first, cfg, cfg.repeats_budget)
    return {"run_secs": samples, "number": number, "first_run_secs": first,
            "max_abs_error": err, "flops": wl.flops}


HANDLERS = {"torch_row": torch_job}


# ------------------------------------------------------------------ the bench

class FusedBench(Bench):
    """``Bench`` with the rows above; PyTorch runs in a worker of this module."""

    def __init__(self, target, threads: int, rounds: int, db=None):
        super().__init__(target, threads, rounds, torch=False, db=db)
        self.torch = None
        if importlib.util.find_spec("torch") is None:
            self.notes.append("PyTorch is not installed (pip install torch==2.13.0): no torch "
                              "rows")
        else:
            from explorer.measure.pool import WorkerPool
            env = {"OPENBLAS_NUM_THREADS": 1, "OMP_NUM_THREADS": self.threads,
                   "MKL_NUM_THREADS": self.threads}
            self.torch = WorkerPool(1, "benchmarks.fused_epilogue", env)

    def close(self) -> None:
        super().close()
        if self.torch is not None:
            self.torch.close()

    def contenders(self, wl) -> list:
        main = main_nest(wl)
        rows = [self._ours("ours fused", wl, expert_schedule(wl, self.target), "expert")]
        if self.db is not None:
            rows.append(self._tuned(wl))
        rows.append(self._ours("ours main", main, expert_schedule(main, self.target),
                               f"{main.name} alone"))
        rows.append(Contender("numpy unfused", lambda: baseline_request(
            self.pools["numpy"], "numpy", wl, self.cfg, self.threads), settle=SETTLE_SECS))
        for row in TORCH_ROWS if self.torch is not None else ():
            rows.append(Contender(f"torch {row}", lambda r=row: self._torch(r, wl),
                                  settle=SETTLE_SECS))
        return rows

    def _torch(self, row: str, wl):
        payload = {"row": row, "op": wl.name, "params": dict(wl.params),
                   "config": self.cfg.as_json(), "threads": self.threads}
        return library_call(self.torch, "torch_row", "torch", payload, self.cfg)


def summary(case: dict) -> dict:
    """Times in ms and ratios to ``ours fused`` of one case's rows."""
    med = {r["impl"]: r["median_secs"] for r in case["rows"]}
    ours = med.get("ours fused")
    out = {"ms": {k: v * 1e3 for k, v in med.items() if v},
           "vs_ours": {k: v / ours for k, v in med.items() if v and ours}}
    if ours and med.get("torch unfused") and med.get("torch main"):
        out["torch_epilogue_ms"] = (med["torch unfused"] - med["torch main"]) * 1e3
        out["beats_unfused_by_its_epilogue"] = ours <= med["torch main"]
    return out


def format_report(report: dict, weights: dict) -> str:
    lines = [f"{report['machine'].get('cpu', '')}; {report['threads']} threads, "
             f"{report['rounds']} interleaved rounds, load {report['machine']['loadavg_start']}"
             f" -> {report['machine']['loadavg_end']}"]
    total: dict = {}
    for case in report["cases"]:
        s = summary(case)
        lines.append(f"\n{case['case']} ({case['key']})")
        lines.append(f"  {'row':16s} {'ms':>9s} {'min-max ms':>17s} {'vs ours':>8s}  note")
        for r in case["rows"]:
            if r["median_secs"] is None:
                lines.append(f"  {r['impl']:16s} {'-':>9s} {'':17s} {'':8s}  "
                             f"{r['error'] or r['note']}")
                continue
            ratio = s["vs_ours"].get(r["impl"])
            lines.append(f"  {r['impl']:16s} {r['median_secs'] * 1e3:9.3f} "
                         f"{r['min_secs'] * 1e3:8.3f}-{r['max_secs'] * 1e3:8.3f} "
                         f"{ratio:8.2f}  {r['note']}")
            total[r["impl"]] = total.get(r["impl"], 0.0) + weights[case["case"]] * r[
                "median_secs"]
        if "torch_epilogue_ms" in s:
            lines.append(f"  torch's epilogue costs {s['torch_epilogue_ms']:.3f} ms; ours fused "
                         f"{'<=' if s['beats_unfused_by_its_epilogue'] else '>'} torch main "
                         "alone")
    if "ours fused" in total:
        lines.append("\nnetwork total (weighted by occurrences), time over ours fused: " +
                     ", ".join(f"{k} {v / total['ours fused']:.2f}" for k, v in total.items()))
    return "\n".join(lines + [f"note: {n}" for n in report["notes"]])


def main() -> None:
    from explorer.database import Database
    from explorer.task_scheduler import load_suite
    from tune_cases import parse_target, tune_missing
    from explorer.cli.bench import BenchCase
    tasks = {t.name: t for t in load_suite("fused")}
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=list(tasks), choices=list(tasks))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--db", default=None, help="a tuning database: adds the 'ours tuned' row")
    p.add_argument("--trials", type=int, default=16, help="tuned into --db first where fewer")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    threads, target = parse_target(p, args, "rounds")
    chosen = [tasks[n] for n in args.tasks]
    tuning = (tune_missing([(t.name, t.workload) for t in chosen], target, args.trials,
                           args.db, args.seed) if args.db else {})
    b = FusedBench(target, threads, args.rounds, db=Database(args.db) if args.db else None)
    try:
        report = b.header()
        report["machine"]["cpu"] = target.describe()
        report["cases"] = [b.run_case(BenchCase.of(t.name, t.workload)) for t in chosen]
        report["machine"]["loadavg_end"] = list(os.getloadavg())
    finally:
        b.close()
    report.update(notes=b.notes, tuning=tuning,
                  summary={c["case"]: summary(c) for c in report["cases"]})
    print(format_report(report, {t.name: t.weight for t in chosen}))
    write_json(args.json, report)


if __name__ == "__main__":
    main()
