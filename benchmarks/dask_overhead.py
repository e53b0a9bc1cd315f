"""What measuring on Dask workers costs against the local pool, on one machine.

    python benchmarks/dask_overhead.py [--size 128] [--count 12] [--seed 0] [--json FILE]

Three figures, each from a LocalCluster of worker processes on loopback (one
``measure`` slot and this host's target tag each) and the local ``Measurer``:

1. Round trip: a candidate whose build fails at once (fault ``build-error``),
   so the time is the path alone: sending the job, the worker pool's answer,
   the result back. Local pool of 1 process against 1 Dask worker.
2. Per-candidate overhead on real candidates: the same gemm candidates
   measured a second time (pools warm, kernels in the compile cache), one at
   a time, each with the same work (one checked run and one timed call):
   local pool of 1 process against 1 Dask worker; the difference per
   candidate is what Dask adds. Figures 1 and 2 are medians per candidate.
3. Throughput on fresh candidates (each compiled once, as in tuning; the same
   candidates for each, each time in fresh processes with a cold compile
   cache): the local pool (one process per core; builds in parallel, runs one
   at a time), 1 Dask worker, 2 Dask workers (on one machine they share its
   cores: on a machine of 2 cores, 2 workers measure side by side and contend).

Candidates are sampled from the gemm design space with ``--seed`` (``--count``
for figure 2 and as many others for figure 3; figure 1 reuses figure 2's). Prints the CPU and the load average: on a
shared machine the figures move with the load.
"""
from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import statistics
import time

from explorer import ops
from explorer.measure import Measurer, RunConfig
from explorer.measure.dask_jobs import worker_resources
from explorer.measure.dask_runner import DaskMeasurer
from explorer.space import DesignSpace
from explorer.target import Target


def timed_batch(measurer, schedules: list, fault: str | None = None) -> tuple:
    """(seconds for the batch, results)."""
    inputs = [measurer.input(s, fault=fault) for s in schedules]
    start = time.perf_counter()
    results = measurer.measure(inputs)
    return time.perf_counter() - start, results


def throughput(name: str, measurer, schedules: list) -> dict:
    """Candidates per second over one batch of ``schedules``, how many came out
    correct, and the others by error kind, under keys that start with ``name``."""
    secs, res = timed_batch(measurer, schedules)
    return {f"{name}_throughput_per_s": len(res) / secs, f"{name}_ok": sum(r.ok for r in res),
            f"{name}_failed": failures(res)}


def failures(results: list) -> dict:
    """How many results failed, by error kind (a cut-off candidate counts here)."""
    return dict(collections.Counter(r.error_kind for r in results if not r.ok))


def one_at_a_time(measurer, schedules: list, fault: str | None = None) -> float:
    """Median seconds per candidate, measured one per call (the median: a shared
    machine's slow seconds do not move it)."""
    secs = []
    for s in schedules:
        start = time.perf_counter()
        measurer.measure([measurer.input(s, fault=fault)])
        secs.append(time.perf_counter() - start)
    return statistics.median(secs)


def cluster(n: int, host: Target):
    from distributed import LocalCluster
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address=":0", resources=worker_resources([host]),
                        silence_logs=logging.ERROR)


def warm(measurer, schedule, workers: int) -> None:
    """Start every worker's pool (one job per worker) before anything is timed."""
    measurer.measure([measurer.input(schedule)] * workers)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=128, help="gemm M = N = K (default 128)")
    ap.add_argument("--count", type=int, default=12, help="candidates per figure")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the figures to this file")
    args = ap.parse_args(argv)
    host = Target("llvm")
    wl = ops.get("gemm", args.size, args.size, args.size)
    space = DesignSpace(wl, host)
    warmup = space.sample(1, seed=args.seed)
    reused, fresh = (space.sample(args.count, seed=args.seed + i) for i in (1, 2))
    cfg = RunConfig()
    # figure 2: the same work for every candidate (one checked run, one timed call)
    fixed = RunConfig(repeats=1, number=1, min_repeat_secs=0.0, warmup=0, cutoff_factor=None)
    out: dict = {"cpu": host.describe(), "load_before": os.getloadavg(),
                 "workload": wl.key, "count": args.count}

    with Measurer(host, fixed, workers=1) as local:
        warm(local, warmup[0], 1)
        out["local_roundtrip_s"] = one_at_a_time(local, reused, fault="build-error")
        local.measure_schedules(reused)                    # compile cache warm
        out["local_per_candidate_s"] = one_at_a_time(local, reused)
    with Measurer(host, cfg) as local:
        warm(local, warmup[0], len(local.pool))
        out["local_pool_workers"] = len(local.pool)
        out.update(throughput("local", local, fresh))

    with cluster(1, host) as c1:
        with DaskMeasurer(c1.scheduler_address, host, fixed) as m:
            warm(m, warmup[0], 1)
            out["dask_roundtrip_s"] = one_at_a_time(m, reused, fault="build-error")
            m.measure_schedules(reused)
            out["dask_per_candidate_s"] = one_at_a_time(m, reused)
        with DaskMeasurer(c1.scheduler_address, host, cfg) as m:
            out.update(throughput("dask1", m, fresh))
    with cluster(2, host) as c2:
        with DaskMeasurer(c2.scheduler_address, host, cfg) as m:
            warm(m, warmup[0], 2)
            out.update(throughput("dask2", m, fresh))
    out["load_after"] = os.getloadavg()
    report(out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


def report(o: dict) -> None:
    n = o["count"]
    print(f"CPU: {o['cpu']}")
    print(f"load average before/after: {o['load_before'][0]:.1f} / {o['load_after'][0]:.1f}")
    print(f"workload: {o['workload']}, {n} candidates per figure")
    print(f"round trip (build fails at once): local {o['local_roundtrip_s'] * 1e3:.1f} ms, "
          f"Dask {o['dask_roundtrip_s'] * 1e3:.1f} ms per candidate")
    over = o["dask_per_candidate_s"] - o["local_per_candidate_s"]
    print(f"warm candidates one at a time: local {o['local_per_candidate_s'] * 1e3:.1f} ms, "
          f"Dask {o['dask_per_candidate_s'] * 1e3:.1f} ms per candidate "
          f"(Dask adds {over * 1e3:+.1f} ms)")
    print(f"throughput, fresh candidates: local pool ({o['local_pool_workers']} processes) "
          f"{o['local_throughput_per_s'] * 60:.0f}/min, Dask 1 worker "
          f"{o['dask1_throughput_per_s'] * 60:.0f}/min, Dask 2 workers "
          f"{o['dask2_throughput_per_s'] * 60:.0f}/min "
          f"(correct: {o['local_ok']}, {o['dask1_ok']}, {o['dask2_ok']} of {n}; not: "
          f"{o['local_failed']}, {o['dask1_failed']}, {o['dask2_failed']})")


if __name__ == "__main__":
    main()
