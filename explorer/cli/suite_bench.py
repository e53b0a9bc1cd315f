"""The closing table of a suite: each task's tuned schedule against numpy and PyTorch.

    explorer tune --suite resnet18 --trials-per-task 64 --db tuning_db   # ends with it
    explorer bench --suite resnet18 --db tuning_db                        # later, again

Per task: the database's best record replayed (``tuned``), numpy (without the
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE overrides, as ``explorer.measure.baselines``
runs it) and PyTorch when installed, each in a process of its own, timed in the
same minutes: ``rounds`` interleaved rounds (each round times every contender of
the task once, in a rotated order), medians reported, every output checked
against the numpy reference. The network total weights each task's median by how
often the layer occurs (the suite's ``weight``); a library's total is given only
when it has a time for every task.
"""
from __future__ import annotations

from .bench import Bench, Contender, _ms, _ratio
from .. import ops
from ..errors import ExplorerError
from ..measure import Roofline, compulsory_bytes, measure_roofline
from ..measure.pool import WorkerDied

LIBS = ("numpy", "torch")


class SuiteBench(Bench):
    """``Bench`` with one tuned row and the library rows per task (no naive or expert
    rows, no scaling or build-time checks); ``run_suite(tasks)`` gives the table."""

    def __init__(self, target, db, threads=None, rounds: int = 5, quick: bool = False,
                 torch: bool = True, log=None, roof: bool = True):
        super().__init__(target, threads, rounds, quick, torch=torch, log=log, db=db)
        self.roof = roof

    def roofline(self):
        """The host's roofline measured now, on the table's threads (None, with a note,
        when it cannot be: the table is still timed)."""
        try:
            return measure_roofline(self.target)
        except ExplorerError as e:
            self.notes.append(f"no roofline: {e}")
            return None

    def _wait_ready(self) -> None:
        """Wait until every worker of the table has started: the library workers import
        numpy and PyTorch, and a roofline measured meanwhile read half the FMA peak (a
        worker that fails to start fails its rows later, with a note)."""
        for pool in [self.measurer.pool, *self.pools.values()]:
            for w in pool.workers:
                try:
                    w.wait_ready()
                except WorkerDied:
                    pass

    def _above_roof_note(self, task, roof) -> str:
        wl = task.workload
        return above_roof(task.name, compulsory_bytes(wl), roof,
                          roof.attainable_gflops(wl) >= roof.peak_gflops)

    def contenders(self, wl) -> list:
        rows = [self._tuned(wl)]
        library = getattr(wl, "checked_by", None) == "library" and wl.name in ops.registry
        for impl, pool in self.pools.items():
            if not library:
                rows.append(Contender(impl, None, f"{wl.key} is not an operator of "
                                      "explorer.ops: no library version"))
                continue
            rows.append(Contender(impl, lambda p=pool, i=impl: _baseline(p, i, wl, self.cfg,
                                                                          self.threads),
                                  settle=0.1))
        return rows

    def run_task(self, task) -> dict:
        wl = task.workload
        self.log(f"timing {task.name} ({wl.key}): tuned against "
                 f"{' and '.join(self.pools)}, {self.rounds} interleaved rounds")
        rows = self.contenders(wl)
        live = [c for c in rows if c.measure is not None]
        for r in range(self.rounds if live else 0):
            for c in live[r % len(live):] + live[:r % len(live)]:
                c.step()
        out = {c.impl: c.row(wl.flops) for c in rows}
        return {"task": task.name, "weight": task.weight, "key": wl.key, "flops": wl.flops,
                "rows": out}

    def run_suite(self, tasks: list) -> dict:
        """The table: one entry per task, then the weighted totals; with ``roof``, the
        host's roofline (measured before and after the tasks, ``higher_roof``) and per task
        the GFLOP/s it allows (``Roofline.attainable_gflops``)."""
        if self.roof:
            self._wait_ready()
        first = self.roofline() if self.roof else None
        entries = [self.run_task(t) for t in tasks]
        last = self.roofline() if first else None
        roof = higher_roof(first, last)
        self.notes += busy_notes(first, last, entries)
        for t, e in zip(tasks, entries):
            e["roof_gflops"] = roof.attainable_gflops(t.workload) if roof else None
            tuned = e["rows"]["tuned"]["median_secs"]
            if roof and tuned and e["flops"] / tuned / 1e9 > 1.05 * e["roof_gflops"]:
                self.notes.append(self._above_roof_note(t, roof))
        totals = {}
        for impl in ("tuned",) + tuple(self.pools):
            secs = [e["rows"][impl]["median_secs"] for e in entries]
            have = [s for s in secs if s is not None]
            totals[impl] = {"weighted_secs": sum(e["weight"] * s for e, s in
                                                 zip(entries, secs)) if len(have) == len(secs)
                            else None, "tasks_timed": len(have)}
        return {"target": str(self.target), "threads": self.threads, "rounds": self.rounds,
                "libraries": list(self.pools), "tasks": entries, "totals": totals,
                "roofline": roof.as_json() if roof else None, "notes": list(self.notes)}


# A host shared with other processes slows the table's timings while they run. Two
# signs of it, each a note under the table. On a quiet 2-core Zen 5 (BERT-base and
# ResNet-18 tables, 15 rounds) the peak's two readings agreed within 3%, the bandwidth's
# within 9%, and every row's median was 1.01-1.20x its fastest round; busy stretches
# there read a peak of 257 against 505 GFLOP/s, and medians 1.36-2.2x the fastest round.
ROOF_AGREES = 0.8     # the lower of the roof's two measurements over the higher
SPREAD_BUSY = 1.25    # a row's median over its fastest round


def above_roof(name: str, nbytes: int, roof, peak_bound: bool) -> str:
    """Why a task ran faster than its roof. A compute-bound task cannot pass the FMA peak
    unless the peak read low (other processes busy while it was measured). A memory-bound
    one is bounded by the copy bandwidth of the level that holds its compulsory bytes
    (``Roofline.bandwidth_for``); it passes that when part of them stays in a faster
    level between runs (a task just over the L2 copy's bytes still finds much of them
    in the L2), or when that copy read low. Before the cache levels were measured, the
    depthwise layers (0.4-6 MiB) ran at 1.2-2.8x a DRAM copy's bandwidth and the
    memory-bound suite (4-48 MiB) at 1.2-4.6x, on a 2-core Zen 5 with a 32 MiB L3."""
    if peak_bound:
        return (f"{name} ran above the measured roof: other processes were busy while it "
                "was measured, and it reads low")
    level, gbs = roof.bandwidth_for(nbytes)
    return (f"{name} ran above its roof, the {level}'s copy bandwidth ({gbs:.1f} GB/s): "
            f"part of its {nbytes / 2**20:.1f} MiB stays in a faster level between runs, "
            f"or the {level} copy read low (other processes busy while it was measured)")


def busy_notes(before, after, entries: list) -> list:
    """Notes where the host was busy while the table ran: the roofline measured before
    and after it disagree (``ROOF_AGREES``), or a row's median reads well above its
    fastest round (``SPREAD_BUSY``, rows of 3 rounds or more). A busy stretch that
    covers every round of a task leaves neither sign: its "of roof" reads low."""
    notes = []
    if before is not None and after is not None:
        for what, unit, a, b in (("FMA peak", "GFLOP/s", before.peak_gflops, after.peak_gflops),
                                 ("copy bandwidth", "GB/s", before.bandwidth_gbs,
                                  after.bandwidth_gbs)):
            if min(a, b) < ROOF_AGREES * max(a, b):
                notes.append(f"the host's {what} read {a:.1f} {unit} before the table and "
                             f"{b:.1f} after: other processes were busy during part of it, "
                             "and its times read slow; time the database again on an idle "
                             "host (explorer bench --suite ... --db ...)")
    for e in entries:
        for impl, r in e["rows"].items():
            med, fast = r.get("median_secs"), r.get("min_secs")
            if med and fast and len(r.get("samples") or ()) >= 3 and med > SPREAD_BUSY * fast:
                notes.append(f"{e['task']} {impl}: its rounds read {_ms(fast)} to "
                             f"{_ms(r['max_secs'])} ms, the median {_ms(med)} ms: the cores were "
                             "busy during some of them (another process, or threads a call "
                             "before left spinning), and the median reads slow")
    return notes


def higher_roof(before, after):
    """One roofline from two measurements, before and after a table: a roof is a
    maximum, and another process busy during one of them lowers it (a peak read at half
    while a neighbour held a core put a tuned conv at 134% of it)."""
    if before is None or after is None:
        return before or after
    after_caches = {name: gbs for name, _, gbs in after.cache_roofs}
    return Roofline(max(before.peak_gflops, after.peak_gflops),
                    max(before.bandwidth_gbs, after.bandwidth_gbs),
                    before.source + "; the higher of two runs, before and after the table",
                    tuple((name, size, max(gbs, after_caches.get(name, 0.0)))
                          for name, size, gbs in before.cache_roofs))


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:g}"


def _baseline(pool, impl, wl, cfg, threads):
    from ..measure.baselines import baseline_request
    return baseline_request(pool, impl, wl, cfg, threads)


def print_suite_table(tasks: list, target, db, **bench_kw) -> dict:
    """Time ``tasks`` (SuiteBench), print the table, return it."""
    bench = SuiteBench(target, db, **bench_kw)
    try:
        table = bench.run_suite(tasks)
    finally:
        bench.close()
    print(format_suite_table(table))
    return table


def untimed(table: dict) -> dict:
    """Task name -> why it has no tuned time in ``table``."""
    out = {}
    for e in table["tasks"]:
        row = e["rows"]["tuned"]
        if row["median_secs"] is None:
            out[e["task"]] = (f"{row['error_kind']}: {row['error'].splitlines()[0][:160]}"
                              if row["error"] else row["note"] or "not timed")
    return out


def format_suite_table(table: dict) -> str:
    """The table as text: per task the medians and the libraries' time over ours."""
    libs = table["libraries"]
    head = ["task", "weight", "tuned ms", "GFLOP/s"] + [f"{lib} ms" for lib in libs] + \
        [f"vs {lib}" for lib in libs] + ["of roof"]
    lines = [head]
    notes = []
    for e in table["tasks"]:
        rows, tuned = e["rows"], e["rows"]["tuned"]["median_secs"]
        cells = [e["task"], f"{e['weight']:g}", _ms(tuned),
                 f"{e['flops'] / tuned / 1e9:.1f}" if tuned else "-"]
        cells += [_ms(rows[lib]["median_secs"]) for lib in libs]
        cells += [_ratio(rows[lib]["median_secs"] / tuned if tuned and rows[lib]["median_secs"]
                         else None) for lib in libs]
        roof = e.get("roof_gflops")
        cells.append(f"{100 * e['flops'] / tuned / 1e9 / roof:.0f}%" if tuned and roof else "-")
        lines.append(cells)
        for impl, r in rows.items():
            if r["median_secs"] is None:
                why = (f"{r['error_kind']}: {r['error'].splitlines()[0][:120]}" if r["error"]
                       else r["note"] or "not timed")
                notes.append(f"{e['task']} {impl}: {why}")
    tot = table["totals"]
    ours = tot["tuned"]["weighted_secs"]
    cells = ["network (weighted)", "", _ms(ours), ""]
    cells += [_ms(tot[lib]["weighted_secs"]) for lib in libs]
    cells += [_ratio(tot[lib]["weighted_secs"] / ours if ours and tot[lib]["weighted_secs"]
                     else None) for lib in libs]
    lines.append(cells + [""])
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    text = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                      enumerate(zip(r, widths))) for r in lines]
    text.insert(1, "-" * len(text[0]))
    text.insert(len(text) - 1, "-" * len(text[0]))
    text.append(f"target {table['target']}, {table['threads']} threads, {table['rounds']} "
                "interleaved rounds, medians; vs LIB = LIB's time over ours (> 1: ours is "
                "faster); network = sum of weight x median over the tasks")
    roof = table.get("roofline")
    if roof:
        levels = "".join(f"{name} (up to {_mib(size)} MiB) {gbs:.0f} GB/s, "
                         for name, size, gbs in roof.get("cache_roofs") or ())
        text.append(f"of roof = tuned GFLOP/s over what this host allows the task: the lower "
                    f"of its FMA peak, {roof['peak_gflops']:.0f} GFLOP/s, and its compulsory "
                    f"bytes at the copy bandwidth of the level that holds them: {levels}"
                    f"memory {roof['bandwidth_gbs']:.1f} GB/s (each the higher of a "
                    "measurement before and one after the table)")
    for impl, t in tot.items():
        if t["weighted_secs"] is None:
            text.append(f"no network total for {impl}: {t['tasks_timed']} of "
                        f"{len(table['tasks'])} tasks timed")
    text += [f"note: {n}" for n in notes + table["notes"]]
    return "\n".join(text)


def bench_suite(args) -> int:
    """``explorer bench --suite NAME --db DIR``: the table of a tuned database, timed now.
    Exit status 1 when a task has no tuned time (each is named, with the reason)."""
    import json
    import sys

    from ..database import Database
    from ..errors import ExplorerError, UsageError
    from ..target import as_target, check_cpu
    from .common import check_writable_file
    from .show import check_database_dir
    from .tune import suite_from_args
    if not args.db:
        raise UsageError("--suite times a tuned database against the libraries: give --db DIR "
                         "(made by explorer tune --suite NAME --db DIR)")
    if args.cases != ["default"]:
        raise UsageError("give --suite or --cases, not both")
    try:
        target = as_target(args.target)
        check_cpu(target)
    except ExplorerError as e:
        raise UsageError(str(e)) from None
    if target.kind != "llvm":
        raise UsageError(f"--suite compares CPU kernels with numpy and PyTorch; for "
                         f"{target.kind} use --cases with --target {target.kind}")
    if args.repeats is not None and not 1 <= args.repeats <= 1000:
        raise UsageError(f"--repeats must be at least 1 and at most 1000, not {args.repeats}")
    args.shape, args.param = None, []
    tasks = suite_from_args(args)
    check_database_dir(args.db)
    if args.json:
        check_writable_file(args.json, "--json")
    table = print_suite_table(tasks, target, Database(args.db), threads=args.threads,
                              rounds=args.repeats or (2 if args.quick else 5),
                              quick=args.quick, torch=not args.no_torch)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    missing = untimed(table)
    for name, why in missing.items():
        print(f"explorer bench: task {name} of --suite {args.suite} has no tuned time: {why}",
              file=sys.stderr)
    return 1 if missing else 0
