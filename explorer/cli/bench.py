"""``explorer bench``: our kernels against numpy and PyTorch on named workloads.

Each case is an (operator, shape); each is measured with the naive schedule
(where affordable), the expert schedule (``explorer.space.expert``; the naive one
with a note for an operator it has no schedule for), numpy (matmul, or im2col +
sgemm for conv2d) and PyTorch when installed. Every contender runs in a process of its
own (library threads spin after each call and would steal the machine from the
next contender), rounds are interleaved (each round measures every contender
once, in a rotated order), and a row reports the median of all its samples
with min and max. Every output is checked against the numpy reference first.
Also reported: 1-thread vs N-thread time of one gemm (scaling), and the build
time (replay + lower + compile) of one gemm 512 candidate.

The JSON report (``--json FILE``) holds the same, with these fields:
``version``, ``created``, ``target``, ``threads``, ``rounds``,
``min_repeat_secs``, ``quick``, ``machine`` (cpu, cores, loadavg at start and
end, busy), ``versions``, ``baselines`` (per library: env vars in effect, BLAS
kernel from threadpoolctl or numpy.show_config, torch parallel info),
``expert`` (where expert schedules came from), ``cases`` (each: ``case``,
``op``, ``params``, ``dtype``, ``key``, ``flops``, ``rows``; each row:
``impl``, ``median_secs``, ``min_secs``, ``max_secs``, ``samples``,
``gflops``, ``ratio_numpy``, ``ratio_torch`` (our GFLOP/s over theirs),
``max_abs_error``, ``error``, ``error_kind``, ``note``, ``build_secs``,
``compile_secs``), ``scaling`` (``case``, ``threads``, ``median_secs``,
``speedup``), ``build_time`` (``case``, ``samples_secs``, ``median_secs``,
``compile_median_secs``, ``goal_secs``) and ``notes``.

``--target cuda`` benches CUDA kernels against the GPU libraries instead
(``explorer.cli.bench_cuda``): on a GPU only (it refuses, saying what is missing,
without one); ``--emulate`` checks the kernels on the host emulator and measures
no speed.
"""
from __future__ import annotations

import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass

from .. import ops
from ..errors import ExplorerError, UsageError
from ..measure import LocalRunner, MeasureInput, MeasureResult, Measurer, RunConfig, busy_note
from ..measure.baselines import baseline_pool, baseline_request
from ..measure.pool import WorkerDied, WorkerTimeout
from ..schedule import Schedule, Trace
from ..space.expert import expert_schedule
from ..target import as_target, check_cpu
from .common import check_fits, check_writable_file
from .show import check_database_dir
from .workload_text import workload_from_case

BUILD_GOAL_SECS = 0.15
SETTLE_SECS = 0.1  # after a library call, let its spinning threads go to sleep


@dataclass(frozen=True)
class BenchCase:
    name: str
    op: str
    params: tuple
    dtype: str = "float32"

    def workload(self):
        return ops.get(self.op, dtype=self.dtype, **dict(self.params))

    @classmethod
    def of(cls, name: str, wl) -> "BenchCase":
        return cls(name, wl.name, wl.params, wl.dtype)


def _cases() -> dict:
    out = {f"gemm-{n}": BenchCase.of(f"gemm-{n}", ops.gemm(n, n, n)) for n in (512, 1024, 2048)}
    out["batch_matmul"] = BenchCase.of("batch_matmul", ops.batch_matmul(16, 128, 128, 64))
    for layer in ops.RESNET18_CONVS:
        out[f"conv-{layer}"] = BenchCase.of(f"conv-{layer}", ops.resnet18_conv(layer))
    return out


CASES = _cases()
GROUPS = {
    "default": ("gemm-1024", "gemm-2048", "batch_matmul", "conv-C2", "conv-C6", "conv-C9",
                "conv-C12"),
    "resnet18": tuple(f"conv-{layer}" for layer in ops.RESNET18_CONVS),
    "tiny": ("gemm:64,64,64", "batch_matmul:2,16,16,8", "conv2d:1,8,10,10,8,3,3"),
}


def resolve_cases(specs) -> list:
    """Cases named by ``specs``: case names, group names, or ``op:v1,v2,...`` (an
    operator of ``explorer.ops`` with all its shape values). Raises ExplorerError."""
    out: list = []
    for spec in specs:
        spec = spec.strip()
        if spec in GROUPS:
            out += resolve_cases(GROUPS[spec])
        elif spec in CASES:
            out.append(CASES[spec])
        elif ":" in spec:
            out.append(BenchCase.of(spec, workload_from_case(spec)))
        else:
            raise ExplorerError(
                f"unknown bench case {spec!r}: use a case ({', '.join(CASES)}), a group "
                f"({', '.join(GROUPS)}), or op:shape such as gemm:256,256,256 (operators: "
                f"{', '.join(ops.registry)})")
    seen: dict = {}
    return [seen.setdefault(c.name, c) for c in out if c.name not in seen]


def split_cases(text: str) -> list:
    """``"gemm-1024,gemm:64,64,64,conv-C6"`` -> ``["gemm-1024", "gemm:64,64,64", "conv-C6"]``:
    commas separate cases, except within an op:shape (up to the next case, group or op:)."""
    out: list = []
    for tok in (t.strip() for t in text.split(",")):
        if out and ":" in out[-1] and ":" not in tok and tok not in CASES and tok not in GROUPS:
            out[-1] += "," + tok
        elif tok:
            out.append(tok)
    return out


def naive_policy(flops: int, quick: bool) -> str:
    """"full" (timed like the rest), "single" (one checked run) or "skip"; the naive
    loop nest runs at about 0.4-1.5 GFLOP/s, so gemm 2048 would take a minute a run."""
    full, single = (1e8, 1e9) if quick else (3e8, 2.5e9)
    return "full" if flops <= full else "single" if flops <= single else "skip"


def expert_schedule_for(wl, target) -> tuple:
    """(schedule, note): the expert schedule, or the naive one and why."""
    try:
        return expert_schedule(wl, target=str(target)), ""
    except Exception as e:  # no expert for this operator, or a broken one: bench on
        why = str(e) if isinstance(e, ExplorerError) else f"{type(e).__name__}: {e}"
        return Schedule(wl), (f"no expert schedule for {wl.key} ({why}): 'expert' is the "
                              "naive schedule")


# ------------------------------------------------------------------ contenders

class Contender:
    """One row of a case: a way to get one sample per round."""

    def __init__(self, impl: str, measure, note: str = "", once: bool = False, settle=0.0):
        self.impl, self.measure, self.note = impl, measure, note
        self.once, self.settle = once, settle
        self.samples: list = []
        self.last: MeasureResult | None = None
        self.failed: MeasureResult | None = None

    def step(self) -> None:
        if self.failed is not None or (self.once and self.last is not None):
            return
        r = self.measure()
        self.last = r
        if r.ok:
            self.samples += list(r.run_secs)
        else:
            self.failed = r
        if self.settle:
            time.sleep(self.settle)

    def row(self, flops: int) -> dict:
        r, s = self.failed or self.last, self.samples
        med = statistics.median(s) if s and not self.failed else None
        return {"impl": self.impl, "median_secs": med, "min_secs": min(s) if med else None,
                "max_secs": max(s) if med else None, "samples": s,
                "gflops": flops / med / 1e9 if med else None,
                "max_abs_error": r.max_abs_error if r else None,
                "error": r.error if r else None, "error_kind": r.error_kind if r else None,
                "note": self.note, "build_secs": r.build_secs if r else None,
                "compile_secs": r.compile_secs if r else None}


class Alias(Contender):
    """A row that repeats another's measurements under its own name (nothing is run)."""

    def __init__(self, impl: str, of: Contender, note: str):
        super().__init__(impl, None, note)
        self.of = of

    def row(self, flops: int) -> dict:
        return dict(self.of.row(flops), impl=self.impl,
                    note="; ".join(filter(None, [self.note, self.of.note])))


# ------------------------------------------------------------------ the run

class Bench:
    """Pools for our kernels and each library; ``run(cases)`` gives the report."""

    def __init__(self, target="llvm", threads: int | None = None, rounds: int = 5,
                 quick: bool = False, torch: bool = True, log=None, db=None):
        base = as_target(target)
        self.threads = threads or base.num_cores or os.cpu_count() or 1
        self.target = base.with_(num_cores=self.threads) if base.kind == "llvm" else base
        self.rounds, self.quick = rounds, quick
        self.db = db    # a tuning Database: its best record per case is the "tuned" row
        self.cfg = RunConfig(repeats=1, number=1, min_repeat_secs=0.02 if quick else 0.1,
                             warmup=1, cutoff_factor=None, run_timeout=120.0,
                             build_timeout=120.0)
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.notes: list = []
        self.load_start = os.getloadavg()
        busy = busy_note(self.threads)   # before our pools start, so they are not counted
        if busy:
            self.log(f"warning: {busy}")
            self.notes.append(busy)
        self.measurer = Measurer(self.target, self.cfg)
        self.single = LocalRunner(self.measurer.pool, self.cfg.with_(repeats=0, warmup=0))
        self.pools = {"numpy": baseline_pool("numpy", self.threads)}
        if torch and importlib.util.find_spec("torch") is not None:
            self.pools["torch"] = baseline_pool("torch", self.threads)
        elif torch:
            self.notes.append("PyTorch is not installed (pip install torch==2.13.0): no torch rows")

    def close(self) -> None:
        self.measurer.close()
        for p in self.pools.values():
            p.close()

    def baseline_info(self) -> dict:
        out = {}
        for impl, pool in self.pools.items():
            try:
                msg = pool[0].call("info", {"impl": impl, "threads": self.threads},
                                   lambda ph, m: 120.0)
            except (WorkerDied, WorkerTimeout) as e:
                pool.restart(0)
                msg = {"error": f"the {impl} worker failed: {e}"}
            out[impl] = msg.get("result", {"error": msg.get("error")})
        return out

    def _ours(self, impl: str, wl, sch, note: str) -> Contender:
        policy = naive_policy(wl.flops, self.quick) if impl == "naive" else "full"
        if policy == "skip":
            est = wl.flops / 0.5e9
            return Contender(impl, None, f"skipped: the naive loop nest would take ~{est:.0f} s "
                             "a run")
        inp = MeasureInput.from_schedule(sch, self.target)
        build = self.measurer.builder.build([inp])[0]
        runner = self.single if policy == "single" else self.measurer.runner
        if policy == "single":
            note = "; ".join(filter(None, [note, "one checked run (slow)"]))
        return Contender(impl, lambda: runner.run_one(inp, build), note, once=policy == "single")

    def _tuned(self, wl) -> Contender:
        """The database's best schedule for ``wl`` on this target, replayed from its trace
        (tuned with ``explorer tune --db``; the target string must match, threads
        included)."""
        top = self.db.best(wl, self.target)
        if not top:
            others = sorted({r.target for r in self.db.records(wl) if r.ok})
            if others:
                return Contender("tuned", None, f"no record for this case on {self.target} "
                                 f"in {self.db.path}; it holds records tuned for "
                                 f"{', '.join(others)} (a schedule is tuned for its target's "
                                 "threads: time it with the same --threads, or tune this "
                                 "target into the --db)")
            return Contender("tuned", None, f"no record for this case on {self.target} in "
                             f"{self.db.path}: run explorer tune with --db first")
        try:
            sch = Trace.from_json(top[0].trace).apply_to(Schedule(wl))
        except ExplorerError as e:
            return Contender("tuned", None, f"the best record in {self.db.path} does not "
                             f"replay ({e}): re-tune into a fresh --db")
        n = len(self.db.records(wl, self.target))
        return self._ours("tuned", wl, sch, f"best of {n} records")

    def contenders(self, wl) -> list:
        expert, note = expert_schedule_for(wl, self.target)
        if note and note not in self.notes:
            self.notes.append(note)
        naive = self._ours("naive", wl, Schedule(wl), "")
        rows = [naive, Alias("expert", naive, "= the naive row: no expert schedule") if note
                else self._ours("expert", wl, expert, "")]
        if self.db is not None:
            rows.append(self._tuned(wl))
        for impl, pool in self.pools.items():
            rows.append(Contender(impl, lambda p=pool, i=impl: baseline_request(
                p, i, wl, self.cfg, self.threads), settle=SETTLE_SECS))
        return rows

    def run_case(self, case: BenchCase) -> dict:
        wl = case.workload()
        self.log(f"bench: {case.name} ({wl.key}, {wl.flops / 1e9:.3g} GFLOP)")
        rows = self.contenders(wl)
        live = [c for c in rows if c.measure is not None]
        for r in range(self.rounds):
            for c in live[r % len(live):] + live[:r % len(live)]:
                c.step()
        out = [c.row(wl.flops) for c in rows]
        _add_ratios(out)
        return {"case": case.name, "op": wl.name, "params": dict(wl.params), "dtype": wl.dtype,
                "key": wl.key, "flops": wl.flops, "rows": out}

    def scaling(self, cases: list) -> dict | None:
        """1 thread against ``threads`` for the expert schedule of gemm-1024 (or the first gemm)."""
        gemms = [c for c in cases if c.op == "gemm"]
        if self.target.kind != "llvm" or self.threads < 2 or not gemms:
            return None
        case = next((c for c in gemms if c.name == "gemm-1024"), gemms[0])
        wl = case.workload()
        conts = []
        for n in (1, self.threads):
            t = self.target.with_(num_cores=n)
            sch, note = expert_schedule_for(wl, t)
            if note:  # the naive schedule has no parallel loop to scale
                return {"case": case.name, "threads": [1, self.threads], "median_secs": None,
                        "speedup": None, "error": f"not measured: {note}"}
            inp = MeasureInput.from_schedule(sch, t)
            build = self.measurer.builder.build([inp])[0]
            conts.append(Contender(str(n), lambda i=inp, b=build: self.measurer.runner.run_one(
                i, b)))
        self.log(f"bench: scaling of {case.name}, 1 vs {self.threads} threads")
        for r in range(self.rounds):
            for c in (conts if r % 2 == 0 else conts[::-1]):
                c.step()
        rows = [c.row(wl.flops) for c in conts]
        med = {c.impl: row["median_secs"] for c, row in zip(conts, rows)}
        err = next((row["error"] for row in rows if row["error"]), None)
        t1, tn = med["1"], med[str(self.threads)]
        return {"case": case.name, "threads": [1, self.threads], "median_secs": med,
                "speedup": t1 / tn if t1 and tn else None, "error": err}

    def build_time(self) -> dict:
        """Median build time (replay + lower + compile, cache bypassed) of one gemm 512."""
        wl = CASES["gemm-512"].workload()
        sch, note = expert_schedule_for(wl, self.target)
        inp = MeasureInput.from_schedule(sch, self.target)
        builds = [self.measurer.builder.build([inp], fresh=True)[0]
                  for _ in range(3 if self.quick else 7)]
        ok = [b for b in builds if b.ok]
        if not ok:
            return {"case": "gemm-512", "error": builds[0].error}
        return {"case": "gemm-512", "schedule": "naive" if note else "expert",
                "samples_secs": [b.build_secs for b in ok],
                "median_secs": statistics.median(b.build_secs for b in ok),
                "compile_median_secs": statistics.median(b.compile_secs for b in ok),
                "goal_secs": BUILD_GOAL_SECS}

    def run(self, cases: list) -> dict:
        report = self.header()
        report["baselines"] = self.baseline_info()
        report["cases"] = [self.run_case(c) for c in cases]
        report["scaling"] = self.scaling(cases)
        report["build_time"] = self.build_time() if self.target.kind == "llvm" else None
        load_end = os.getloadavg()
        report["machine"]["loadavg_end"] = list(load_end)
        report["notes"] = self.notes
        return report

    def header(self) -> dict:
        return {"version": 1, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "target": str(self.target), "threads": self.threads, "rounds": self.rounds,
                "min_repeat_secs": self.cfg.min_repeat_secs, "quick": self.quick,
                "machine": {"cpu": getattr(self.target, "mcpu", ""),
                            "cores": os.cpu_count(), "loadavg_start": list(self.load_start)},
                "versions": _versions(), "expert": "explorer.space.expert"}


def _versions() -> dict:
    import llvmlite
    import numpy
    out = {"python": platform.python_version(), "numpy": numpy.__version__,
           "llvmlite": llvmlite.__version__}
    spec = importlib.util.find_spec("torch")
    if spec is not None:
        from importlib.metadata import PackageNotFoundError, version
        try:
            out["torch"] = version("torch")
        except PackageNotFoundError:
            pass
    return out


def _add_ratios(rows: list) -> None:
    ref = {r["impl"]: r["median_secs"] for r in rows if r["impl"] in ("numpy", "torch")}
    for r in rows:
        for lib in ("numpy", "torch"):
            ok = r["impl"] not in ("numpy", "torch") and r["median_secs"] and ref.get(lib)
            r[f"ratio_{lib}"] = ref[lib] / r["median_secs"] if ok else None


# ------------------------------------------------------------------ output

def _ms(x) -> str:
    return f"{x * 1e3:.3f}" if x is not None else "-"


def _ratio(x) -> str:
    return f"{x:.2f}x" if x is not None else "-"


def _check(row: dict) -> str:
    if row["error"]:
        return f"{row['error_kind']}: {row['error'].splitlines()[0][:70]}"
    if row["median_secs"] is None:
        return row["note"] or "-"
    err = row["max_abs_error"]
    return ("ok" + (f" (err {err:.1e})" if err is not None else "")
            + (f"; {row['note']}" if row["note"] else ""))


def format_table(report: dict) -> str:
    """The report as a text table, then scaling, build time and notes."""
    head = ("case", "impl", "median ms", "min-max ms", "GFLOP/s", "vs numpy", "vs torch",
            "check")
    lines = [[*head]]
    for case in report["cases"]:
        for i, r in enumerate(case["rows"]):
            spread = (f"{_ms(r['min_secs'])}-{_ms(r['max_secs'])}" if r["median_secs"]
                      else "-")
            lines.append([case["case"] if i == 0 else "", r["impl"], _ms(r["median_secs"]),
                          spread, f"{r['gflops']:.1f}" if r["gflops"] else "-",
                          _ratio(r["ratio_numpy"]), _ratio(r["ratio_torch"]), _check(r)])
    widths = [max(len(row[i]) for row in lines) for i in range(len(head) - 1)]
    text = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in
                      enumerate(zip(row, widths))) + "  " + row[-1] for row in lines]
    text.insert(1, "-" * len(text[0]))
    text.append("")
    threads = f"{report['threads']} threads, " if report.get("threads") else ""
    text.append(f"target {report['target']}, {threads}"
                f"{report['rounds']} interleaved rounds, medians; vs numpy/torch = our GFLOP/s "
                "over theirs")
    sc = report.get("scaling")
    if sc:
        if sc.get("speedup"):
            med = sc["median_secs"]
            t1, tn = med["1"], med[str(sc["threads"][1])]
            text.append(f"scaling {sc['case']} (expert): 1 thread {_ms(t1)} ms, "
                        f"{sc['threads'][1]} threads {_ms(tn)} ms: {sc['speedup']:.2f}x")
        else:
            text.append(f"scaling {sc['case']}: {sc.get('error')}")
    bt = report.get("build_time")
    if bt:
        if bt.get("median_secs") is not None:
            text.append(f"build time {bt['case']} ({bt['schedule']} schedule, replay + lower + "
                        f"compile, median of {len(bt['samples_secs'])}): "
                        f"{_ms(bt['median_secs'])} ms (compile {_ms(bt['compile_median_secs'])}"
                        f" ms; goal <= {_ms(bt['goal_secs'])} ms)")
        else:
            text.append(f"build time {bt['case']}: {bt.get('error')}")
    blas = (report.get("baselines") or {}).get("numpy", {}).get("blas", {})
    pools = blas.get("pools") or []
    if pools:
        p = pools[0]
        text.append(f"numpy BLAS: {p.get('internal_api')} {p.get('version')} "
                    f"({p.get('architecture')}), {p.get('num_threads')} threads")
    text += [f"note: {n}" for n in report.get("notes", [])]
    return "\n".join(text)


# ------------------------------------------------------------------ command line

def add_arguments(parser) -> None:
    """Options of ``explorer bench``."""
    parser.add_argument("--cases", nargs="+", default=["default"], metavar="CASE",
                        help="cases, groups or op:shape, separated by spaces or commas "
                        "(default: default). "
                        f"Cases: {', '.join(CASES)}. Groups: {', '.join(GROUPS)}. op:shape: an "
                        "operator of explorer.ops with all its shape values, e.g. "
                        "gemm:256,256,256 or conv2d:1,64,56,56,64,3,3")
    parser.add_argument("--repeats", type=int, default=None,
                        help="interleaved rounds per contender (default 5, 2 with --quick)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for our kernels and the libraries (default: the target's "
                        "cores)")
    parser.add_argument("--target", default="llvm", help="target (default: %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="fewer rounds, shorter repeats, naive schedule only on small cases")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON to FILE")
    parser.add_argument("--db", metavar="DIR", help="a tuning database (explorer tune --db): "
                        "adds a 'tuned' row per case, its best record replayed")
    parser.add_argument("--emulate", action="store_true", help="with --target cuda: run each "
                        "kernel once on the host emulator of its CUDA C and check it against "
                        "numpy (no GPU needed; measures no speed; default cases: tiny)")
    parser.add_argument("--suite", metavar="NAME", help="instead of --cases: every task of a "
                        "suite (explorer tune --suite) from --db against the libraries, and the "
                        "network total weighted by occurrences (explorer.cli.suite_bench)")
    parser.add_argument("--list", action="store_true", help="list cases and groups, then exit")


MAX_REPEATS = 1000
MAX_THREADS = 1024


def _list() -> int:
    for name, case in CASES.items():
        print(f"{name:14s} {case.workload().key}")
    for name, members in GROUPS.items():
        print(f"{name:14s} group: {', '.join(members)}")
    return 0


def check_args(args) -> tuple:
    """(cases, target) of ``args`` after every check that needs no measuring: cases and
    their memory, target (LLVM must know its CPU), counts, --json and --db. Raises
    UsageError naming what to fix; creates nothing. ``--target cuda`` without
    ``--emulate`` needs a GPU: BuildError (status 1) saying what is missing."""
    emulate = getattr(args, "emulate", False)
    specs = ["tiny"] if emulate and args.cases == ["default"] else args.cases
    try:
        cases = resolve_cases([c for text in specs for c in split_cases(text)])
        target = as_target(args.target)
        check_cpu(target)
    except ExplorerError as e:
        raise UsageError(str(e)) from None
    if emulate and target.kind != "cuda":
        raise UsageError(f"--emulate runs CUDA C on the host emulator: give --target cuda, not "
                         f"{args.target!r}")
    if not cases:
        raise UsageError("--cases names no case: give a case, a group or op:shape")
    for name, v, hi in (("--repeats", args.repeats, MAX_REPEATS),
                        ("--threads", args.threads, MAX_THREADS)):
        if v is not None and not 1 <= v <= hi:
            raise UsageError(f"{name} must be at least 1 and at most {hi}, not {v}")
    for case in cases:
        check_fits(case.workload(), f"use a smaller case than {case.name}")
    if args.json:
        check_writable_file(args.json, "--json")
    if args.db:
        check_database_dir(args.db)
    if target.kind == "cuda" and not emulate:
        from .bench_cuda import refuse_without_gpu
        refuse_without_gpu(target)
    return cases, target


def main(args) -> int:
    """Run ``explorer bench`` with parsed ``args``; usage errors raise UsageError."""
    if args.list:
        return _list()
    if getattr(args, "suite", None):
        from .suite_bench import bench_suite
        return bench_suite(args)
    cases, target = check_args(args)
    rounds = args.repeats or (2 if args.quick else 5)
    db = None
    if args.db:
        from ..database import Database
        db = Database(args.db)
    if target.kind == "cuda":
        from .bench_cuda import CudaBench
        libs = tuple(i for i in ("torch", "cupy") if not (args.no_torch and i == "torch"))
        bench = CudaBench(target, 1 if args.emulate else rounds, args.quick, args.emulate, db,
                          libs, log=lambda m: print(m, file=sys.stderr, flush=True))
    else:
        bench = Bench(target, args.threads, rounds, args.quick, torch=not args.no_torch, db=db)
    try:
        report = bench.run(cases)
    finally:
        bench.close()
    print(format_table(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json}")
    return 0
