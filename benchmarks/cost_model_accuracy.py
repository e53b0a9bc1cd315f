"""How well the cost model ranks unseen candidates, on real LLVM timings.

Protocol (issue 5: "after 256 measured gemm and conv2d candidates, pairwise rank
accuracy on the next 64 unseen >= 0.85"): for each workload (gemm 512^3 and
ResNet-18 C6 by default), sample candidates from a multi-level-tiling space
like MetaSchedule's CPU space (SSRSRS tiles, optional cache_write, parallel
outer loops, vectorized inner loop, unroll steps 0/16/64/512 made explicit,
decompose_reduction, the conv padding inlined or placed); build each with the
LLVM backend for the host (all cores), check it against numpy, time it: the
fastest of 5 repeats, and the fastest of 4 such passes over all kernels,
minutes apart; ``--rounds N`` then re-times every kernel in N round-robin
rounds (one timing each per round) and the label is the fastest of all (other
processes on a shared machine only add time). Then, over 5 shuffles, train on
256 candidates and score the next 64: pairwise rank accuracy and top-8 recall
of each model configuration, each workload on its own and with the other
workload's records given first (transfer), and the default model on
MetaSchedule's 164 features alone. It also prints how well timing passes (and
the even rounds with the odd) agree with each other: labels are that noisy.

The defaults (``XGBCostModel()``: rank objective from the codegen prior, eta
0.05, 200 rounds) were chosen by cross-validation inside the 256 training
candidates of shuffles 0-4 (train on 192, score 64); ``--first-shuffle 5
--shuffles 20`` scores them on shuffles not used for choosing. Measured here
(2-core Emerald Rapids VM, features of version 3, LLVM backend as of the
affine address split, labels from 4 passes and 48 rounds on a quiet machine:
even rounds agree with odd on 0.972 gemm / 0.988 C6 of pairs): **0.863** (gemm
0.876, C6 0.849) on shuffles 0-4, **0.854** (gemm 0.863, C6 0.846) on shuffles
5-24; MetaSchedule's 164 features alone 0.798; random 0.483. With 24 rounds:
0.859 and 0.851. History of the held-out figure: 0.840 with features of
version 2 on the previous backend (48-round labels); the backend then stopped
losing conv2d accumulator tiles kept in the output buffer to memory (its
cycle estimate assumed them in registers: the estimate alone ranked C6 0.754
of pairs, on re-measured candidates 0.783), and version 3 counts guarded reads in loop-vectorized
code as gathers (0.802; model 0.835 -> 0.844 on 24-round labels). On shuffles 5-24
of the previous labels the model ordered 0.98 of pairs more than 3x apart,
0.83-0.86 of pairs 1.5-3x apart, 0.65 of pairs 1.15-1.5x apart. Around the
defaults (prior weight 0.5/2, depth 2/4, 400 rounds, eta 0.1, colsample 0.8,
subsample 1, min_child_weight 1) no variant scored above them on shuffles 0-4,
an average of 5 models with different seeds gained 0.001, and a model on the
sampling decisions alone (tile sizes, unroll, vectorize, cache and padding
choices) reached 0.723 / 0.728.

Measurements are cached in --data (one .npz per workload: seeds, passes,
costs); features are recomputed from the seeds with the current extractor:

    python3 benchmarks/cost_model_accuracy.py                  # ~40 min on 2 cores, then cached
    python3 benchmarks/cost_model_accuracy.py --kinds rank,random --shuffles 3
    python3 benchmarks/cost_model_accuracy.py --kinds rank --first-shuffle 5 --shuffles 20
    python3 benchmarks/cost_model_accuracy.py --rounds 48 --kinds rank   # +10 min a workload
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from explorer import ScheduleError, Schedule, build, lower, ops  # noqa: E402
from explorer.target import Target  # noqa: E402
from explorer.cost_model import METASCHEDULE, RandomModel, XGBCostModel  # noqa: E402
from explorer.cost_model.metrics import pairwise_rank_accuracy, top_k_recall  # noqa: E402
from explorer.features import NUM_FEATURES, extract  # noqa: E402
from explorer.ir.functor import walk_stmt  # noqa: E402
from explorer.ir.stmt import BlockRealize, For  # noqa: E402
from explorer.measure.config import RunConfig  # noqa: E402
from explorer.measure.timing import fast_call, time_call, timed_repeat  # noqa: E402

WORKLOADS = {
    "gemm512": lambda: ops.get("gemm", 512, 512, 512),
    "gemm256x1024x512": lambda: ops.get("gemm", 256, 1024, 512),
    "c6": lambda: ops.resnet18_conv("C6"),
    "c9": lambda: ops.resnet18_conv("C9"),
}
UNROLL_STEPS = (0, 16, 64, 512)


# ------------------------------------------------------------------ the space

def _block(sch, name):
    try:
        return sch.get_block(name)
    except ScheduleError:
        return None


def _iter_kinds(sch, name) -> list:
    for n, _ in walk_stmt(sch.func.body):
        if isinstance(n, BlockRealize) and n.block.name == name:
            return [iv.kind for iv in n.block.iter_vars]
    raise KeyError(name)


def _extent(sch, loop) -> int:
    name = sch.get(loop)
    for n, _ in walk_stmt(sch.func.body):
        if isinstance(n, For) and n.var.name == name:
            return n.extent
    return 1


def _try(fn, *args):
    try:
        return fn(*args)
    except ScheduleError:
        return None


def sample_candidate(wl, seed: int) -> Schedule:
    """One schedule of ``wl`` (gemm or conv2d) from a MetaSchedule-like CPU space."""
    rng = random.Random(seed)
    sch = Schedule(wl, seed=seed)
    name = "C" if _block(sch, "C") else "conv"
    b = sch.get_block(name)
    pad = _block(sch, "pad")
    if pad is not None and rng.random() < 0.6:
        sch.compute_inline(pad)
        pad = None
    S, R = [[], [], [], []], [[], []]
    for lp, kind in zip(sch.get_loops(b), _iter_kinds(sch, name)):
        levels = S if kind == "S" else R
        fs = sch.sample_perfect_tile(lp, len(levels), max_innermost_factor=64)
        for lvl, part in enumerate(sch.split(lp, fs)):
            levels[lvl].append(part)
    sch.reorder(*(S[0] + S[1] + R[0] + S[2] + R[1] + S[3]))
    cw_level = rng.choice([None, 0, 1])
    cw = None
    if cw_level is not None:
        cw = sch.cache_write(b, 0, "local")
        sch.reverse_compute_at(cw, S[cw_level][-1])
    outer = sch.fuse(*S[0])
    sch.parallel(outer)
    if pad is not None and rng.random() < 0.5:
        _try(sch.compute_at, pad, rng.choice([outer] + S[1] + R[0]))
    inner = S[3][-1]
    vectorized = rng.random() < 0.8 and _extent(sch, inner) > 1
    if vectorized:
        sch.vectorize(inner)
    step = rng.choice(UNROLL_STEPS)
    if step:
        sch.annotate(outer, "pragma_auto_unroll_max_step", step)
        _unroll_inner(sch, b, step, skip_last=vectorized)
    if rng.random() < 0.7:
        init = _try(sch.decompose_reduction, b, R[0][0])
        if init is not None and vectorized:
            _vectorize_innermost(sch, init)
    if cw is not None and vectorized:
        _vectorize_innermost(sch, cw)
    return sch


def _unroll_inner(sch, b, step: int, skip_last: bool) -> None:
    loops = sch.get_loops(b)
    if skip_last:
        loops = loops[:-1]
    prod = 1
    for lp in reversed(loops):
        ext = _extent(sch, lp)
        if prod * ext > step:
            break
        prod *= ext
        if ext > 1:
            _try(sch.unroll, lp)


def _vectorize_innermost(sch, block) -> None:
    loops = sch.get_loops(block)
    if loops and _extent(sch, loops[-1]) > 1:
        _try(sch.vectorize, loops[-1])


# ------------------------------------------------------------------ measuring

PASSES = 4


def time_kernel(kernel, args, min_seconds: float = 0.01, repeats: int = 5,
                threads: int = 1) -> float:
    """Fastest of ``repeats`` timed repeats (each >= ``min_seconds``, all within
    ``repeats`` x 0.5 s; a slower kernel is timed once), timed as the tuner times
    candidates: on a shared machine other processes only ever add time, so the
    minimum ranks candidates most stably (measured here under load: two passes
    agree on 0.915 of pairs with the minimum of 5, 0.846 with the median of 3)."""
    cfg = RunConfig(repeats=repeats, min_repeat_secs=min_seconds)
    return min(time_call(fast_call(kernel, args), cfg, budget_secs=0.5 * repeats,
                         threads=threads))


def measure_workload(key: str, count: int, data_dir: str, target, passes: int = PASSES) -> dict:
    """Sample, build, check and time ``count`` candidates of ``key``, then time every
    kernel ``passes - 1`` more times, minutes apart; cost = the fastest pass (cached
    in ``data_dir``). Background load on this shared machine comes and goes: a
    single pass re-measured later agreed with the first on only 0.81-0.86 of pairs."""
    path = os.path.join(data_dir, f"{key}.npz")
    if os.path.exists(path):
        with np.load(path, allow_pickle=False) as z:
            cached = {k: z[k] for k in z.files}
        if len(cached["costs"]) >= count and len(cached.get("passes", ())) >= passes:
            return cached
    wl = WORKLOADS[key]()
    args = wl.make_args(seed=0)
    kernels, first, seeds, t_start = [], [], [], time.time()
    while len(kernels) < count:
        seed = len(seeds) + 1
        kernel = build(sample_candidate(wl, seed), target)
        for a, b in zip(args, wl.make_args(seed=0)):
            a[...] = b
        kernel(*args)
        wl.check(args)
        kernels.append(kernel)
        first.append(time_kernel(kernel, args, threads=target.num_cores or 1))
        seeds.append(seed)
        if len(kernels) % 50 == 0:
            print(f"  {key}: {len(kernels)}/{count} built and measured, "
                  f"{time.time() - t_start:.0f} s", flush=True)
    runs = [first] + [[time_kernel(k, args, threads=target.num_cores or 1) for k in kernels]
                      for _ in range(passes - 1)]
    runs = np.asarray(runs)
    out = {"costs": runs.min(axis=0), "passes": runs, "seeds": np.asarray(seeds),
           "flops": np.asarray(wl.flops)}
    os.makedirs(data_dir, exist_ok=True)
    np.savez(path, **out)
    return out


def retime_rounds(key: str, data: dict, rounds: int, data_dir: str, target) -> dict:
    """Time every cached candidate of ``key`` in ``rounds`` more round-robin rounds
    (each round times each kernel once, >= 10 ms), add them to the cache under
    ``rounds`` and make the cost the fastest of all its timings. Slow spells on a
    shared VM last seconds and slow whole stretches of a pass; one timing per
    kernel per round spreads each kernel's samples over the whole run, so a spell
    hits all kernels of a round alike (measured, 40 gemm candidates: two blocks of
    10 rounds agreed on 0.965-0.986 of pairs, two blocks of 2 passes of 5 repeats
    on 0.955-0.974, in the same time)."""
    have = data.get("rounds", np.zeros((0, len(data["costs"]))))
    if len(have) >= rounds:
        return data
    wl = WORKLOADS[key]()
    args = wl.make_args(seed=0)
    kernels = []
    for seed in data["seeds"]:
        kernels.append(build(sample_candidate(wl, int(seed)), target))
        for a, b in zip(args, wl.make_args(seed=0)):
            a[...] = b
        kernels[-1](*args)
        wl.check(args)
    numbers = [max(1, int(0.01 / max(c, 1e-6))) for c in data["costs"]]
    new = []
    t_start = time.time()
    for r in range(rounds - len(have)):
        row = []
        for kernel, number in zip(kernels, numbers):
            row.append(timed_repeat(fast_call(kernel, args), number, float("inf")))
        new.append(row)
        print(f"  {key}: round {len(have) + r + 1}/{rounds}, {time.time() - t_start:.0f} s",
              flush=True)
    out = dict(data)
    out["rounds"] = np.concatenate([have, np.asarray(new)])
    out["costs"] = np.minimum(data["passes"].min(axis=0), out["rounds"].min(axis=0))
    np.savez(os.path.join(data_dir, f"{key}.npz"),
             **{k: v for k, v in out.items() if k != "feats"})
    return out


def rounds_agreement(data: dict) -> float:
    """Agreement of the fastest of the even rounds with the fastest of the odd
    ones (nan without rounds): how reproducible the round-robin labels are."""
    r = data.get("rounds")
    if r is None or len(r) < 2:
        return float("nan")
    return pairwise_rank_accuracy(-r[0::2].min(axis=0), r[1::2].min(axis=0))


def features_of(key: str, seeds, target) -> list:
    """Feature rows of the candidates ``seeds`` of ``key``, with the current extractor
    (measurements are cached, features are not: they follow the code)."""
    wl = WORKLOADS[key]()
    return [extract(lower(sample_candidate(wl, int(s))), target) for s in seeds]


# ------------------------------------------------------------------ evaluation

MODELS = {  # the defaults; without the prior; the previous defaults; the reg objective;
    # the rank objective with MetaSchedule's trees; MetaSchedule's recipe
    "rank": lambda seed: XGBCostModel(seed=seed, min_samples=0),
    "rank-no-prior": lambda seed: XGBCostModel(prior_weight=0, seed=seed, min_samples=0),
    "rank-v1": lambda seed: XGBCostModel(prior_weight=0, eta=0.1, num_boost_round=300,
                                         seed=seed, min_samples=0),
    "reg": lambda seed: XGBCostModel(objective="reg", seed=seed, min_samples=0),
    "rank-ms-trees": lambda seed: XGBCostModel(**{**METASCHEDULE, "objective": "rank"},
                                               seed=seed, min_samples=0),
    "metaschedule": lambda seed: XGBCostModel(**METASCHEDULE, seed=seed, min_samples=0),
    "random": lambda seed: RandomModel(seed=seed),
}


def evaluate(datasets: dict, kind: str, shuffles, n_train: int, n_test: int,
             transfer: bool, columns=None, top_k: int = 8) -> dict:
    """{workload: [(rank accuracy, top-k recall, train seconds), ...]}, one per shuffle
    (the seeds ``shuffles``): train on ``n_train`` candidates in shuffled order, score
    the next ``n_test``."""
    out: dict = {}
    for key, data in datasets.items():
        feats = [f if columns is None else f[:, columns] for f in data["feats"]]
        costs = data["costs"]
        for s in shuffles:
            order = np.random.default_rng(s).permutation(len(costs))
            tr, te = order[:n_train], order[n_train:n_train + n_test]
            model = MODELS[kind](s)
            t0 = time.perf_counter()
            if transfer:
                for okey, od in datasets.items():
                    if okey != key:
                        of = [f if columns is None else f[:, columns] for f in od["feats"]]
                        model.update(of, od["costs"], groups=okey)
            model.update([feats[i] for i in tr], costs[tr], groups=key)
            seconds = time.perf_counter() - t0
            pred = model.predict([feats[i] for i in te])
            out.setdefault(key, []).append((pairwise_rank_accuracy(pred, costs[te]),
                                            top_k_recall(pred, costs[te], top_k), seconds))
    return out


def report(label: str, results: dict) -> None:
    cells = []
    for key, vals in results.items():
        acc, rec, sec = (np.array([v[i] for v in vals]) for i in range(3))
        cells.append(f"{key} {acc.mean():.3f}±{acc.std():.3f} (recall@8 {rec.mean():.2f}, "
                     f"train {sec.mean():.2f} s)")
    mean = np.mean([v[0] for vals in results.values() for v in vals])
    print(f"  {label:24s} {mean:.3f} | " + " | ".join(cells), flush=True)


def noise_ceiling(data: dict) -> float:
    """Mean agreement of one timing pass with another: the most a model can reach
    against a single pass; against the minimum of the passes it is higher."""
    runs = data["passes"]
    pairs = [(i, j) for i in range(len(runs)) for j in range(i + 1, len(runs))]
    return float(np.mean([pairwise_rank_accuracy(-runs[i], runs[j]) for i, j in pairs]))


def split_half_agreement(data: dict) -> float:
    """Mean agreement of the faster of two passes with the faster of the other two
    (every split of four passes into halves; nan with fewer than four passes)."""
    runs = data["passes"]
    if len(runs) < 4:
        return float("nan")
    out = []
    for a in [(0, i) for i in range(1, len(runs))]:
        b = [i for i in range(len(runs)) if i not in a]
        out.append(pairwise_rank_accuracy(-runs[list(a)].min(axis=0), runs[b].min(axis=0)))
    return float(np.mean(out))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default="gemm512,c6")
    p.add_argument("--count", type=int, default=400)
    p.add_argument("--passes", type=int, default=PASSES)
    p.add_argument("--data", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                  "explorer-cost-model-data"))
    p.add_argument("--rounds", type=int, default=0,
                   help="re-time the cached candidates in this many round-robin rounds")
    p.add_argument("--shuffles", type=int, default=5)
    p.add_argument("--first-shuffle", type=int, default=0,
                   help="seed of the first shuffle (the defaults were chosen on 0-4)")
    p.add_argument("--train", type=int, default=256)
    p.add_argument("--test", type=int, default=64)
    p.add_argument("--kinds", default=",".join(MODELS))
    args = p.parse_args()
    target = Target("llvm")
    datasets = {}
    for key in args.workloads.split(","):
        print(f"{key}: measuring {args.count} candidates on {target} (cached)", flush=True)
        d = dict(measure_workload(key, args.count, args.data, target, args.passes))
        if args.rounds:
            d = retime_rounds(key, d, args.rounds, args.data, target)
        t0 = time.perf_counter()
        d["feats"] = features_of(key, d["seeds"], target)
        ms = (time.perf_counter() - t0) / len(d["seeds"]) * 1e3
        gf = d["flops"] / d["costs"] / 1e9
        print(f"  GFLOP/s min {gf.min():.2f} median {np.median(gf):.2f} max {gf.max():.1f}; "
              f"pass-to-pass agreement {noise_ceiling(d):.3f}, faster of two passes with "
              f"faster of the other two {split_half_agreement(d):.3f}, even rounds with odd "
              f"{rounds_agreement(d):.3f}; {NUM_FEATURES} features, "
              f"{ms:.1f} ms per candidate to sample, lower and extract", flush=True)
        datasets[key] = d
    shuffles = range(args.first_shuffle, args.first_shuffle + args.shuffles)
    print(f"\npairwise rank accuracy on the next {args.test} after {args.train} "
          f"(mean ± std over shuffles {shuffles.start}-{shuffles.stop - 1})")
    for transfer in ([False, True] if len(datasets) > 1 else [False]):
        print("with the other workloads' records first (transfer)" if transfer else
              "each workload on its own")
        for kind in args.kinds.split(","):
            report(kind, evaluate(datasets, kind, shuffles, args.train, args.test, transfer))
        if not transfer and "rank" in args.kinds.split(","):
            report("rank, MS's 164 only", evaluate(datasets, "rank", shuffles, args.train,
                                                    args.test, False, slice(0, 164)))


if __name__ == "__main__":
    main()
