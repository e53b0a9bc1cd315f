"""Run the property tests' examples outside pytest, with counts: a long run in the background.

    python benchmarks/property_run.py --examples 20000 --seed 0
    python benchmarks/property_run.py --examples 2000 --seed 1 --chunk 200 --jobs 2

Examples are those of ``tests/test_properties.py`` (same strategies and checks,
``tests/strategies.py`` and ``tests/properties.py``): ``--space-share`` of them
start from a design-space sample, the others from the naive schedule. The same
``--seed`` gives the same examples.

The run is cut into chunks; each chunk is one child process that runs Hypothesis
with the seed ``(seed, chunk, attempt)``, counts every example instead of stopping
at the first failure, and writes a breadcrumb (workload, seed, trace, the call being
made) before each primitive and before the kernels run. Kernels run in that process
(parallel loops on real threads), so a kernel that segfaults, or hangs past
``--hang``, kills the chunk, not the run: the parent counts a crash, saves the
breadcrumb as a regression JSON and starts the chunk's remaining examples in a new
child with the next attempt's seed. (The project's measurement workers would also
survive a crash, but they take a finished trace: the hostile primitive calls, the
NaN-filled outputs and the per-primitive counts would have to be rebuilt around
them, and a hang in a primitive would still take this process down.)

A chunk that found failures is run again with the same seed, now stopping at the
first failure: Hypothesis finds it again (the examples before it are the same),
shrinks it, and its final replay writes ``<out>/<op>_<kind>_<digest>.json``
(``--no-shrink``: the unshrunk failures are written instead). The summary gives
examples run, primitive calls per kind (worked / raised an ExplorerError), the
outcome of each example, and failures by kind: wrong results, raw exceptions,
changed-by-error schedules, replay mismatches, build failures, crashes.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

START_STEPS = {"naive": 8, "space": 3}
FAILURE_KINDS = ("wrong", "raw_exception", "changed_by_error", "index_overflow", "replay",
                 "build", "crash", "hang", "error")


# ------------------------------------------------------------------ the child

def child(args) -> int:
    """Run one chunk: ``args.examples`` examples from seed ``args.chunk_seed``."""
    from hypothesis import HealthCheck, Phase, given, seed, settings
    from hypothesis import strategies as st

    from explorer import ExplorerError
    from properties import PropertyFailure, encode_call, workload_spec
    from strategies import check_example, save_failure

    state = pathlib.Path(args.state)
    stats = {"examples": 0, "prims": {}, "space": {}, "outcomes": Counter(),
             "failures": Counter(), "messages": [], "seconds": 0.0}
    failures: list = []

    def breadcrumb(wl, sch_seed, trace, prim, call_args):
        doc, last_call = trace.as_json(), None
        if prim is not None:
            try:
                doc, last_call = encode_call(trace, prim, call_args)
            except ExplorerError:  # an argument no trace can hold: the trace alone
                pass
        crumb = {"workload": workload_spec(wl), "seed": sch_seed, "trace": doc,
                 "last_call": last_call, "done": stats["examples"]}
        tmp = state.with_suffix(".crumb.tmp")
        tmp.write_text(json.dumps(crumb))
        os.replace(tmp, state.with_suffix(".crumb"))

    def one(data, raising: bool):
        start = ("space" if data.draw(st.integers(0, 99), label="start?") < args.space_share
                 else "naive")
        t0 = time.perf_counter()
        if args.inject and not raising and stats["examples"] == int(args.inject.split(":")[1]):
            _inject(args.inject.split(":")[0], breadcrumb)
        try:
            got = check_example(data, start, START_STEPS[start], "benchmarks/property_run.py",
                                fork=args.fork or raising, on_call=breadcrumb,
                                directory=args.out)
        except PropertyFailure as failure:
            if raising:
                raise
            stats["failures"][failure.kind] += 1
            stats["messages"].append(f"{failure.kind}: {str(failure).splitlines()[0][:200]}")
            failures.append(failure)
            got = None
        stats["seconds"] += time.perf_counter() - t0
        stats["examples"] += 1
        if got is not None:
            stats["outcomes"][got["outcome"]] += 1
            for group in ("prims", "space"):
                for key, (ok, bad) in got[group].items():
                    entry = stats[group].setdefault(key, [0, 0])
                    entry[0] += ok
                    entry[1] += bad
        if not raising:   # kept up to date: the parent reads it if this process dies
            _write_stats(state, stats)

    def run(raising: bool):
        phases = [Phase.generate, Phase.shrink] if raising else [Phase.generate]

        @seed(args.chunk_seed)
        @settings(max_examples=args.examples, deadline=None, database=None, phases=phases,
                  suppress_health_check=list(HealthCheck), print_blob=False)
        @given(data=st.data())
        def examples(data):
            one(data, raising)
        examples()

    run(raising=False)
    _write_stats(state, stats)
    if failures:
        out = pathlib.Path(args.out)
        before = set(out.glob("*.json")) if out.exists() else set()
        if args.shrink:
            try:
                run(raising=True)
            except Exception:  # noqa: BLE001 - the shrunk failure: its final replay saved it
                pass
        if not (set(out.glob("*.json")) - before if out.exists() else set()):
            for f in failures:  # not shrunk (--no-shrink, or it did not come back)
                wl, sch_seed, steps = f.example
                save_failure(wl, sch_seed, steps, f, "benchmarks/property_run.py (unshrunk)",
                             directory=args.out)
    return 0


def _inject(kind: str, breadcrumb) -> None:
    """Die (``crash``) or stop (``hang``) here, to test the parent's handling of both."""
    import signal
    from explorer import ops
    breadcrumb(ops.elementwise(2, 3), 0, _empty_trace(), None, ())
    if kind == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(10 ** 6)


def _empty_trace():
    from explorer import Trace
    return Trace()


def _write_stats(state: pathlib.Path, stats: dict) -> None:
    out = dict(stats, outcomes=dict(stats["outcomes"]), failures=dict(stats["failures"]))
    tmp = state.with_suffix(".tmp")
    tmp.write_text(json.dumps(out))
    os.replace(tmp, state)


# ------------------------------------------------------------------ the parent

def new_totals() -> dict:
    return {"examples": 0, "seconds": 0.0, "prims": {}, "space": {}, "outcomes": Counter(),
            "failures": Counter(), "messages": []}


def run_chunk(args, index: int, n: int, workdir: pathlib.Path) -> dict:
    """Run ``n`` examples of chunk ``index``, restarting after crashes and hangs; the
    chunk's totals."""
    totals, attempt = new_totals(), 0
    while n > 0:
        state = workdir / f"chunk{index}_{attempt}.json"
        cmd = [sys.executable, __file__, "--child", "--examples", str(n), "--state",
               str(state), "--chunk-seed", str(_chunk_seed(args.seed, index, attempt)),
               "--space-share", str(args.space_share), "--out", str(args.out)]
        cmd += ["--fork"] if args.fork else []
        cmd += ["--inject", args.inject] if args.inject and attempt == 0 else []
        cmd += [] if args.shrink else ["--no-shrink"]
        crumb = state.with_suffix(".crumb")
        proc = subprocess.Popen(cmd, cwd=ROOT)
        why = _wait(proc, crumb, args.hang)
        if state.exists():   # the examples it finished, also when it died after them
            _add(totals, json.loads(state.read_text()))
        if why is None:
            return totals
        done = _crashed(args, totals, crumb, why)
        n -= done + 1
        attempt += 1
    return totals


def _chunk_seed(base: int, index: int, attempt: int) -> int:
    return (base * 1_000_003 + index) * 101 + attempt


def _wait(proc, crumb: pathlib.Path, hang: float):
    """None when the child finished normally; else why it did not."""
    while True:
        try:
            code = proc.wait(timeout=5)
            return (None if code == 0 else f"killed by signal {-code}" if code < 0
                    else f"exit status {code} (see its traceback above)")
        except subprocess.TimeoutExpired:
            pass
        last = crumb.stat().st_mtime if crumb.exists() else None
        if last is not None and time.time() - last > hang:
            proc.kill()
            proc.wait()
            return f"no progress for {hang:.0f} s (a hang)"


def _crashed(args, totals: dict, crumb: pathlib.Path, why: str) -> int:
    """Count a crashed example, save its breadcrumb; how many examples came before it."""
    kind = "hang" if "hang" in why else "crash" if "signal" in why else "error"
    if not crumb.exists():   # it never reached an example: nothing to count or retry
        raise SystemExit(f"a chunk died before its first example ({why}): the harness or "
                         "the package does not work here; stopping")
    totals["failures"][kind] += 1
    totals["examples"] += 1
    doc = json.loads(crumb.read_text())
    path = _save_crumb(args.out, doc, kind, why)
    totals["messages"].append(f"{kind}: {why}; saved as {path}")
    return int(doc.get("done", 0))


def _save_crumb(out, doc: dict, kind: str, why: str) -> pathlib.Path:
    import hashlib
    from properties import dumps_regression
    body = {k: doc[k] for k in ("workload", "seed", "last_call", "trace")}
    digest = hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:10]
    path = pathlib.Path(out) / f"{doc['workload']['op']}_{kind}_{digest}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps_regression({"description": f"the process died: {why}",
                                      "kind": kind, "found_by": "benchmarks/property_run.py",
                                      **body}))
    return path


def _add(totals: dict, stats: dict) -> None:
    totals["examples"] += stats["examples"]
    totals["seconds"] += stats["seconds"]
    totals["outcomes"].update(stats["outcomes"])
    totals["failures"].update(stats["failures"])
    totals["messages"] += stats["messages"]
    for group in ("prims", "space"):
        for key, (ok, bad) in stats[group].items():
            entry = totals[group].setdefault(key, [0, 0])
            entry[0] += ok
            entry[1] += bad


def summary(args, totals: dict, wall: float) -> str:
    n = max(1, totals["examples"])
    lines = [f"seed {args.seed}: {totals['examples']} examples in {wall:.0f} s "
             f"({wall / n * 1000:.0f} ms each, {totals['seconds'] / n * 1000:.0f} ms inside "
             f"the examples)",
             "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(totals["outcomes"].items())),
             "primitive calls (worked / raised an ExplorerError):"]
    for prim, (ok, bad) in sorted(totals["prims"].items()):
        lines.append(f"  {prim:26s} {ok:8d} {bad:8d}")
    if totals["space"]:
        lines.append("design-space draws (valid / rejected with a reason):")
        for key, (ok, bad) in sorted(totals["space"].items()):
            lines.append(f"  {key:26s} {ok:8d} {bad:8d}")
    raised = sum(bad for _, bad in totals["prims"].values())
    lines.append(f"primitives that raised: {raised}")
    lines.append("failures: " + ", ".join(f"{k} {totals['failures'].get(k, 0)}"
                                          for k in FAILURE_KINDS))
    lines += [f"  {m}" for m in totals["messages"][:40]]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--examples", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chunk", type=int, default=250, help="examples per child process")
    p.add_argument("--jobs", type=int, default=1, help="chunks run at once")
    p.add_argument("--space-share", type=int, default=25,
                   help="percent of examples that start from a design-space sample")
    p.add_argument("--out", default=str(ROOT / "tests" / "regressions"),
                   help="where failing cases are written as regression JSON")
    p.add_argument("--hang", type=float, default=300.0,
                   help="seconds without a breadcrumb before a chunk counts as hung")
    p.add_argument("--fork", action="store_true",
                   help="run each LLVM kernel in a forked child (one thread), as pytest does")
    p.add_argument("--no-shrink", dest="shrink", action="store_false")
    p.add_argument("--json", help="also write the totals here")
    p.add_argument("--inject", help=argparse.SUPPRESS)   # crash:N or hang:N (tests)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--state", help=argparse.SUPPRESS)
    p.add_argument("--chunk-seed", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args)
    totals = new_totals()
    sizes = [min(args.chunk, args.examples - i) for i in range(0, args.examples, args.chunk)]
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="property_run_") as tmp:
        _run_all(args, sizes, pathlib.Path(tmp), totals, t0)
    text = summary(args, totals, time.time() - t0)
    print(text)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            dict(totals, outcomes=dict(totals["outcomes"]),
                 failures=dict(totals["failures"])), indent=1))
    return 1 if sum(totals["failures"].values()) else 0


def _run_all(args, sizes: list, workdir: pathlib.Path, totals: dict, t0: float) -> None:
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(run_chunk, args, i, n, workdir) for i, n in enumerate(sizes)]
        for k, f in enumerate(futures):
            _add(totals, f.result())
            print(f"[{time.time() - t0:6.0f} s] chunk {k + 1}/{len(sizes)}: "
                  f"{totals['examples']} examples, failures {dict(totals['failures'])}",
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
