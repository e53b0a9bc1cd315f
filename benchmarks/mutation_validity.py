"""Mutation validity: the share of mutations that are valid on the first try.

    python benchmarks/mutation_validity.py --target cuda --mutations 400 --seed 0
    python benchmarks/mutation_validity.py --target llvm --mutations 400 --seed 0 --ops gemm,conv2d
    python benchmarks/mutation_validity.py --target cuda --shapes small --each --json out.json

Per operator of the library (``explorer.ops.registry``; ``--shapes tuning`` takes each
operator's default shape, ``small`` the interpreter-sized one, ``ci`` those of
``tests/test_space_gpu.py``): sample ``--parents``
schedules from the design space, then draw ``--mutations`` mutations, cycling through
the parents, as the search draws them (``DesignSpace.mutate``: one mutator picked by
weight). A mutation is valid when its trace replays and passes every postprocessor
(``VerifyGPUCode`` included on ``cuda``) the first time: no retry. Failures are
broken down by mutator and by reason (the postprocessor's message with its numbers
replaced by ``N``). ``--each`` also applies every mutator directly, ``--mutations``
times each, so that a mutator the weights rarely pick (thread binding: 2%) is measured
too. Valid children on ``cuda`` are also checked against the limits of the target read
from their lowered program (``gpu_limits_of_lowered``), independently of the verifier.

The same ``--seed`` gives the same parents, the same mutations and the same figures.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from explorer import Target, ops
from explorer.ir.functor import walk_stmt
from explorer.ir.stmt import Allocate, For, SeqStmt
from explorer.lower import lower
from explorer.space import DesignSpace

_BYTES = {"float32": 4, "float64": 8, "int32": 4, "bool": 1}
REGISTER_OVERHEAD = 16    # VerifyGPUCode's estimate of the registers besides local arrays


@dataclass
class Tally:
    """Counts for one operator (and per mutator)."""
    tried: int = 0
    valid: int = 0
    none: int = 0                       # the mutator found nothing to change
    reasons: Counter = field(default_factory=Counter)
    by_mutator: dict = field(default_factory=dict)   # name -> [tried, valid]
    over_limits: list = field(default_factory=list)  # valid children the lowered code refutes
    parents_over: list = field(default_factory=list)  # the same of the sampled parents
    examples: list = field(default_factory=list)     # the first ``keep`` valid children
    seconds: float = 0.0

    @property
    def share(self) -> float:
        return self.valid / self.tried if self.tried else float("nan")

    def add(self, mutator: str, ok: bool, reason: str | None) -> None:
        self.tried += 1
        self.valid += ok
        row = self.by_mutator.setdefault(mutator, [0, 0])
        row[0] += 1
        row[1] += ok
        if not ok:
            self.reasons[f"{mutator}: {reason}"] += 1

    def as_json(self) -> dict:
        return {"tried": self.tried, "valid": self.valid, "share": self.share, "none": self.none,
                "by_mutator": self.by_mutator, "reasons": dict(self.reasons.most_common()),
                "over_limits": self.over_limits, "parents_over": self.parents_over,
                "seconds": round(self.seconds, 2)}


class _Recorder:
    """Wraps a mutator to note which one made the last child."""

    def __init__(self, mutator, log: list):
        self.mutator, self.log = mutator, log

    def initialize(self, target) -> None:
        self.mutator.initialize(target)

    def apply(self, trace, rng, workload):
        out = self.mutator.apply(trace, rng, workload)
        if out is not None:
            self.log.append(type(self.mutator).__name__)
        return out


def reason_kind(message: str | None) -> str:
    """A failure message with its numbers and quoted names generalised."""
    text = re.sub(r"'[^']*'", "'X'", message or "unknown")
    return re.sub(r"\d+", "N", text)[:160]


# shapes small enough for the interpreter, large enough for a space with choices (the
# interpreter-sized ``small`` shapes of the registry leave a warp no room: 1 draw in 100 is
# valid) and for the sampled thread counts of elementwise and transpose
CI_SHAPES = {"gemm": (32, 32, 16), "batch_matmul": (2, 16, 16, 8),
             "conv2d": (1, 2, 10, 10, 16, 3, 3), "depthwise_conv2d": (1, 8, 10, 10, 3, 3),
             "dense_bias_relu": (32, 32, 16), "conv2d_bias_relu": (1, 2, 10, 10, 16, 3, 3),
             "gemm_bias_gelu": (32, 32, 16), "layer_norm": (16, 64), "softmax": (16, 64),
             "row_sum": (16, 64), "elementwise": (64, 64), "transpose": (64, 64)}


def workloads(shapes: str, names=None) -> dict:
    """{operator name: workload} of the library at ``shapes``: "tuning" (each operator's
    default shape), "small" (the interpreter-sized one) or "ci" (``CI_SHAPES``; an
    operator it does not list takes its small shape)."""
    out = {}
    for name, spec in ops.registry.items():
        if names and name not in names:
            continue
        if shapes == "ci" and name in CI_SHAPES:
            out[name] = ops.get(name, *CI_SHAPES[name])
        else:
            out[name] = spec.fn(**(spec.small if shapes == "small" else {}))
    return out


def measure(wl, target, mutations: int, seed: int, parents: int = 20, each: bool = False,
            check_limits: bool = True, keep: int = 0) -> tuple:
    """(Tally of the weighted draws, {mutator: Tally} of the direct ones when ``each``),
    for ``mutations`` mutations of ``parents`` schedules sampled with ``seed``. The
    sampled parents are checked against the limits too (``over_limits``); the first
    ``keep`` valid children's schedules are kept in ``examples``."""
    start = time.perf_counter()
    log: list = []
    sp = DesignSpace(wl, target, max_tries=max(512, 64 * parents))
    sp.mutators = [(_Recorder(m, log), w) for m, w in sp.mutators]
    drawn = sp.sample(parents, seed=seed)
    rng = random.Random(seed)
    weighted = Tally()
    for sch in drawn:
        _check_limits(sch, sp.target, weighted.parents_over, check_limits)
    for k in range(mutations):
        child = sp.mutate(drawn[k % len(drawn)].trace, rng)
        if child is None:
            weighted.none += 1
            continue
        sch = _judge(sp, child, log[-1], weighted, check_limits)
        if sch is not None and len(weighted.examples) < keep:
            weighted.examples.append(sch)
    weighted.seconds = time.perf_counter() - start
    direct = {}
    if each:
        for rec, _ in sp.mutators:
            name = type(rec.mutator).__name__
            tally = direct[name] = Tally()
            t0 = time.perf_counter()
            for k in range(mutations):
                design = sp.design_trace(drawn[k % len(drawn)].trace)
                child = rec.mutator.apply(design, rng, sp.workload)
                if child is None:
                    tally.none += 1
                    continue
                _judge(sp, child, name, tally, check_limits)
            tally.seconds = time.perf_counter() - t0
    return weighted, direct


def _judge(sp, child, mutator: str, tally: Tally, check_limits: bool):
    sch = sp.apply(child)
    tally.add(mutator, sch is not None, reason_kind(sp.last_error))
    if sch is not None:
        _check_limits(sch, sp.target, tally.over_limits, check_limits)
    return sch


def _check_limits(sch, target, out: list, check: bool) -> None:
    if check and target.is_gpu:
        broken = over_limits(gpu_limits_of_lowered(lower(sch)), target)
        if broken:
            out.append(broken)


# ------------------------------------------------------------ limits read from lowered code

def gpu_limits_of_lowered(func) -> list:
    """Per kernel (top-level loop) of a lowered function: threads per block, virtual
    threads, shared bytes per block and local 4-byte words per thread, read from its
    thread loops and ``Allocate`` nodes (not from the verifier's model). A local buffer
    allocated inside vthread loops counts once per virtual thread."""
    out = []
    for kernel in _top_loops(func.body):
        tags: dict = {}
        shared = local_words = 0
        for node, path in walk_stmt(kernel):
            if isinstance(node, For) and node.kind == "thread":
                tags[node.thread] = max(tags.get(node.thread, 1), node.extent)
            if isinstance(node, Allocate):
                buf = node.buffer
                n = math.prod(buf.shape) * _BYTES.get(buf.dtype, 4)
                if buf.scope == "shared":
                    shared += n
                elif buf.scope == "local":
                    v = math.prod(p.extent for p in path if isinstance(p, For)
                                  and p.kind == "thread" and p.thread.startswith("vthread"))
                    local_words += v * -(-n // 4)
        out.append({"kernel": kernel.var.name,
                    "threads": math.prod(e for t, e in tags.items() if t.startswith("threadIdx")),
                    "vthreads": math.prod(e for t, e in tags.items() if t.startswith("vthread")),
                    "shared_bytes": shared, "local_words": local_words})
    return out


def over_limits(kernels: list, target, max_vthread: int = 8,
                overhead: int = REGISTER_OVERHEAD) -> str | None:
    """The first limit of ``target`` a kernel of ``gpu_limits_of_lowered`` breaks, or None.
    Registers: local words plus ``overhead`` within the registers per thread and the
    registers per SM over the block's threads."""
    for k in kernels:
        if k["threads"] > target.max_threads_per_block:
            return f"{k['kernel']}: {k['threads']} threads"
        if k["vthreads"] > max_vthread:
            return f"{k['kernel']}: {k['vthreads']} virtual threads"
        if k["shared_bytes"] > target.max_shared_memory_per_block:
            return f"{k['kernel']}: {k['shared_bytes']} bytes of shared memory"
        regs = k["local_words"] + overhead
        if regs > min(target.max_registers_per_thread,
                      target.max_registers_per_sm // max(k["threads"], 1)):
            return (f"{k['kernel']}: about {regs} registers per thread for "
                    f"{k['threads']} threads")
    return None


def _top_loops(body) -> list:
    if isinstance(body, For):
        return [body]
    if isinstance(body, SeqStmt):
        return [k for s in body.stmts for k in _top_loops(s)]
    if isinstance(body, Allocate):
        return _top_loops(body.body)
    return []


# ------------------------------------------------------------ report

def report(results: dict, target) -> str:
    lines = [f"target {target} ({target.describe()})",
             f"{'operator':18s} {'valid':>9s} {'share':>7s} {'none':>5s} {'s':>6s}  by mutator"]
    for name, (w, _) in results.items():
        per = ", ".join(f"{m} {v}/{t}" for m, (t, v) in sorted(w.by_mutator.items()))
        lines.append(f"{name:18s} {w.valid:4d}/{w.tried:<4d} {w.share:7.1%} {w.none:5d} "
                     f"{w.seconds:6.1f}  {per}")
    tried = sum(w.tried for w, _ in results.values())
    valid = sum(w.valid for w, _ in results.values())
    lines.append(f"{'all':18s} {valid:4d}/{tried:<4d} {valid / max(tried, 1):7.1%}")
    for name, (w, direct) in results.items():
        for m, t in direct.items():
            lines.append(f"  direct {name:16s} {m:22s} {t.valid:4d}/{t.tried:<4d} "
                         f"{t.share:7.1%} (none {t.none})")
    for name, (w, direct) in results.items():
        reasons = Counter(w.reasons)
        for t in direct.values():
            reasons.update(t.reasons)
        for reason, count in reasons.most_common(5):
            lines.append(f"  fail {name:14s} {count:4d} x {reason}")
        over = w.over_limits + [x for t in direct.values() for x in t.over_limits]
        if over or w.parents_over:
            lines.append(f"  OVER LIMITS {name}: {len(over)} valid children, "
                         f"{len(w.parents_over)} parents, e.g. {(over or w.parents_over)[0]}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default="cuda")
    p.add_argument("--mutations", type=int, default=400)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--parents", type=int, default=20)
    p.add_argument("--shapes", choices=("tuning", "small", "ci"), default="tuning")
    p.add_argument("--ops", default="", help="comma-separated operator names (default: all)")
    p.add_argument("--each", action="store_true", help="also apply every mutator directly")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    target = Target(a.target)
    names = [n for n in a.ops.split(",") if n] or None
    results = {}
    for name, wl in workloads(a.shapes, names).items():
        results[name] = measure(wl, target, a.mutations, a.seed, a.parents, a.each)
        w = results[name][0]
        print(f"{name}: {w.valid}/{w.tried} valid ({w.none} without a mutation), "
              f"{w.seconds:.1f} s", file=sys.stderr, flush=True)
    print(report(results, target))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"target": str(target), "seed": a.seed, "mutations": a.mutations,
                       "shapes": a.shapes,
                       "ops": {n: {"weighted": w.as_json(),
                                   "direct": {m: t.as_json() for m, t in d.items()}}
                               for n, (w, d) in results.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
