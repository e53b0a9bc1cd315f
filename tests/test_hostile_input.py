"""Hostile input to primitives, sampling, traces and database lines: the project's own
error naming what to fix, bounded time and memory, and a schedule unchanged after an
error (issue 13)."""
import inspect
import json
import random
import time

import pytest

from explorer import (DatabaseError, Schedule, ScheduleError, Trace, TraceError, build, ops)
from explorer.limits import MAX_EXTENT, MAX_LOOP_DEPTH, MAX_TILE_PARTS
from explorer.schedule.sampling import perfect_tilings, sample_perfect_tile
from explorer.schedule.trace import KINDS, replay
from explorer.schema import (INSTRUCTIONS, json_depth, parse_json, validate_record,
                             validate_retime, validate_trace_json)


def gemm():
    return ops.get("gemm", M=16, N=12, K=8)


def loops(sch, block="C"):
    b = sch.get_block(block)
    return (b, *sch.get_loops(b))


def state(sch):
    """Everything a primitive may change: function, trace, decisions, handles, random state."""
    return (sch.func, sch.trace.as_json(), dict(sch._table), sch._rng.getstate())


def refused(sch, call, match, error=ScheduleError):
    before = state(sch)
    with pytest.raises(error, match=match):
        call()
    assert state(sch) == before, "a primitive that raised changed the schedule"


def run_and_check(sch, wl):
    args = wl.make_args(4)
    build(sch, "interp")(*args)
    wl.check(args)


# ------------------------------------------------------------ split and fuse limits
@pytest.mark.parametrize("factors,match", [
    ([None, 2 ** 63], r"split: loop 'i': factor 9223372036854775808 is more than 2147483647 "
                      r"\(2\*\*31 - 1\), the largest loop extent"),
    ([None, 2 ** 64], r"factor 18446744073709551616 is more than 2147483647"),
    ([2 ** 31, None], r"factor 2147483648 is more than 2147483647"),
    ([2 ** 16, 2 ** 16], r"split: loop 'i': factors \[65536, 65536\] multiply to 4294967296, "
                         r"more than 2147483647 \(2\*\*31 - 1\)"),
    ([None, 2.0], r"factor 2.0 must be a positive int or None"),
    ([None, "2"], r"factor '2' must be a positive int or None"),
    ([None, True], r"factor True must be a positive int or None"),
    ([1] * (MAX_LOOP_DEPTH + 1) + [None], r"split: loop 'i': 66 factors; at most 64 loops"),
    ("8", r"split: factors must be a list"),
])
def test_split_refuses_factors_beyond_the_index_type(factors, match):
    sch = Schedule(gemm())
    _, i, j, k = loops(sch)
    refused(sch, lambda: sch.split(i, factors), match)


def test_split_refuses_nests_deeper_than_the_limit():
    wl = gemm()
    sch = Schedule(wl)
    _, i, j, k = loops(sch)
    inner = sch.split(i, [1] * 40 + [None])[-1]
    refused(sch, lambda: sch.split(inner, [1] * 30 + [None]),
            r"split: loop 'i_40': splitting it into 31 loops would nest 73 loops; at most 64")
    run_and_check(sch, wl)


def test_split_at_the_limit_is_accepted_and_runs():
    wl = ops.get("row_sum", M=2, N=5)
    sch = Schedule(wl)
    _, i, k = loops(sch, "B")
    assert len(sch.split(i, [MAX_EXTENT, None])) == 2   # the largest extent is accepted
    s2 = Schedule(wl)
    _, i2, k2 = loops(s2, "B")
    s2.split(i2, [None, 7])       # a guarded overshoot stays legal and right
    run_and_check(s2, wl)


def test_fuse_refuses_more_iterations_than_the_index_type():
    sch = Schedule(gemm())
    _, i, j, k = loops(sch)
    i0, i1 = sch.split(i, [2 ** 30, None])
    j0, j1 = sch.split(j, [2 ** 30, None])
    refused(sch, lambda: sch.fuse(i0, i1, j0),
            r"fuse: loops \['i_0', 'i_1', 'j_0'\] have 1152921504606846976 iterations in all, "
            r"more than 2147483647 \(2\*\*31 - 1\)")


# ------------------------------------------------------------ all or nothing
def test_tile_keeps_nothing_when_a_later_split_fails():
    wl = gemm()
    sch = Schedule(wl)
    _, i, j, k = loops(sch)
    refused(sch, lambda: sch.tile([i, k], [4, 0]), r"split: loop 'k': factor 0 must be")
    sch.tile([i, j], [4, 6])     # the old handles still work: nothing was split
    run_and_check(sch, wl)


def test_tile_keeps_nothing_when_the_reorder_fails():
    wl = ops.get("softmax", M=3, N=4)
    sch = Schedule(wl)
    i = sch.get_loops(sch.get_block("row_max"))[0]
    i1 = sch.get_loops(sch.get_block("exp"))[0]
    refused(sch, lambda: sch.tile([i, i1], [2, 2]), r"reorder: loops .* are not one "
                                                    r"perfectly nested chain")
    assert "i_0" not in sch.script()
    sch.split(i, [None, 2])
    run_and_check(sch, wl)


def test_tile_refuses_non_lists():
    sch = Schedule(gemm())
    _, i, j, k = loops(sch)
    refused(sch, lambda: sch.tile(i, 4), r"tile: loops and factors must be lists")
    refused(sch, lambda: sch.tile([i, j], [4]), r"tile: 2 loops but 1 factors")


HOSTILE_CALLS = [   # every public primitive with a bad argument: (call, pinned words)
    (lambda s, b, i, j, k: s.get_block(["C"]), r"get_block: block \['C'\] is not"),
    (lambda s, b, i, j, k: s.get_loops(i), r"get_loops: expected a BlockRV"),
    (lambda s, b, i, j, k: s.split(i, [None, 2 ** 40]), r"largest loop extent"),
    (lambda s, b, i, j, k: s.fuse(b), r"fuse: expected a LoopRV"),
    (lambda s, b, i, j, k: s.reorder(i, 3), r"reorder: expected a LoopRV"),
    (lambda s, b, i, j, k: s.tile([i, j], [2, "x"]), r"factor 'x' must be a positive int"),
    (lambda s, b, i, j, k: s.parallel(k), r"parallel: loop 'k' is a reduction loop"),
    (lambda s, b, i, j, k: s.bind(i, ["x"]), r"bind: unknown thread axis"),
    (lambda s, b, i, j, k: s.cache_read(b, "0", "local"), r"read_index '0' is out of range"),
    (lambda s, b, i, j, k: s.cache_write(b, 0, ["local"]), r"unknown storage scope"),
    (lambda s, b, i, j, k: s.transform_layout(b, 5, [0]), r"buffer must be \('read', i\)"),
    (lambda s, b, i, j, k: s.compute_at(b, 3), r"compute_at: expected a LoopRV"),
    (lambda s, b, i, j, k: s.rfactor(k, "0"), r"rfactor: factor_axis '0' must be in"),
    (lambda s, b, i, j, k: s.annotate(i, "x", float("nan")), r"annotate: value must be an "
                                                             r"int, finite float"),
    (lambda s, b, i, j, k: s.annotate(i, "x", [1]), r"annotate: value must be"),
    (lambda s, b, i, j, k: s.unannotate(i, "x"), r"unannotate: 'i' has no annotation 'x'"),
    (lambda s, b, i, j, k: s.sample_perfect_tile(i, 1, 4), r"use n >= 2"),
    (lambda s, b, i, j, k: s.sample_categorical([1, 2], ["a", "b"]), r"probabilities must be "
                                                                     r"finite numbers"),
    (lambda s, b, i, j, k: s.sample_compute_location(b, decision=True), r"decision True is "
                                                                        r"not a legal location"),
]


@pytest.mark.parametrize("n", range(len(HOSTILE_CALLS)))
def test_every_primitive_is_all_or_nothing(n):
    call, match = HOSTILE_CALLS[n]
    sch = Schedule(gemm(), seed=3)
    env = loops(sch)
    sch.sample_categorical([1, 2, 3], [1, 1, 1])      # some random state and a decision
    refused(sch, lambda: call(sch, *env), match)


# ------------------------------------------------------------ sample_perfect_tile
@pytest.mark.parametrize("args,match", [
    ((1, 4), r"sample_perfect_tile: n=1 keeps the whole extent 16 innermost, more than "
             r"max_innermost_factor=4; use n >= 2 or max_innermost_factor >= 16"),
    ((0, 4), r"n must be an int in \[1, 16\], got 0"),
    ((-3, 4), r"n must be an int in \[1, 16\], got -3"),
    ((1.5, 4), r"n must be an int in \[1, 16\], got 1.5"),
    ((True, 4), r"n must be an int in \[1, 16\], got True"),
    ((2000, 64), r"n must be an int in \[1, 16\], got 2000"),
    ((2, 0), r"max_innermost_factor must be an int in \[1, 2147483647\].*got 0"),
    ((2, "8"), r"max_innermost_factor must be an int in \[1, 2147483647\].*got '8'"),
    ((2, 2 ** 40), r"max_innermost_factor must be an int in \[1, 2147483647\]"),
])
def test_sample_perfect_tile_bad_arguments(args, match):
    sch = Schedule(gemm())
    _, i, j, k = loops(sch)
    refused(sch, lambda: sch.sample_perfect_tile(i, *args), match)


@pytest.mark.parametrize("decision", [[4, 4, 1], [3, 5], [4.0, 4], [8, 2.0], ["4", "4"],
                                      [1, 16], 16, "44", 0, [True, 16]])
def test_sample_perfect_tile_bad_decisions(decision):
    sch = Schedule(gemm())
    _, i, j, k = loops(sch)
    match = r"sample_perfect_tile: decision .* is not 2 positive factors of 16 with " \
            r"innermost <= 8"
    refused(sch, lambda: sch.sample_perfect_tile(i, 2, 8, decision=decision), match)


def test_sample_perfect_tile_n1_through_traces():
    wl = gemm()
    sch = Schedule(wl)
    _, i, j, k = loops(sch)
    sch.sample_perfect_tile(i, 1, 16)          # legal: 16 fits innermost
    data = sch.trace.as_json()
    data["insts"][-1][1][2] = 4                # max_innermost_factor 4 < 16
    for d in ([], [[2, [16]]]):
        t = Trace.from_json(dict(data, decisions=d)) if not d else None
        if t is None:
            with pytest.raises(TraceError, match=r"decision \[16\] of instruction 2 .* "
                                                 r"innermost <= 4"):
                Trace.from_json(dict(data, decisions=d))
            continue
        with pytest.raises(ScheduleError, match=r"use n >= 2 or max_innermost_factor >= 16"):
            t.apply_to(Schedule(wl))


@pytest.mark.parametrize("extent,n,max_inner", [(256, 16, 64), (2 ** 30, 16, 64),
                                                (2 * 3 * 5 * 7 * 11 * 13 * 17 * 19, 16, 64),
                                                (1, 16, 1), (997, 16, 1000)])
def test_sampling_is_bounded_in_time(extent, n, max_inner):
    start = time.perf_counter()
    rng = random.Random(0)
    for _ in range(20):
        d = sample_perfect_tile(extent, n, max_inner, rng)
        assert len(d) == n and d[-1] <= max_inner
        prod = 1
        for x in d:
            prod *= x
        assert prod == extent
    assert len(perfect_tilings(extent, n, max_inner)) > 0
    assert time.perf_counter() - start < 5


def _all_tilings(extent, n, max_inner):
    if n == 1:
        return [(extent,)] if extent <= max_inner else []
    return [(d,) + t for d in range(1, extent + 1) if extent % d == 0
            for t in _all_tilings(extent // d, n - 1, max_inner)]


@pytest.mark.parametrize("extent", [1, 7, 12, 16, 36, 60, 64, 96, 128])
def test_lazy_tilings_equal_the_enumeration_so_samples_keep_their_seeds(extent):
    for n in (2, 3, 4):
        for max_inner in (1, 4, 16, 64):
            assert list(perfect_tilings(extent, n, max_inner)) == _all_tilings(extent, n,
                                                                                max_inner)


def test_hostile_tiling_traces_are_refused_fast():
    sch = Schedule(ops.get("row_sum", M=4, N=256))
    _, i, k = loops(sch, "B")
    sch.sample_perfect_tile(k, 2, 64)
    data = sch.trace.as_json()
    for n in (24, 2000):
        bad = json.loads(json.dumps(data))
        bad["insts"][-1][1][1] = n
        bad["insts"][-1][3] = [f"v{100 + x}" for x in range(n)]
        bad["decisions"] = []
        start = time.perf_counter()
        with pytest.raises(TraceError, match=rf"input 1: expected an int in \[1, 16\], got {n}"):
            Trace.from_json(json.dumps(bad))
        assert time.perf_counter() - start < 1


# ------------------------------------------------------------ sample_categorical
@pytest.mark.parametrize("cands,probs,decision,match", [
    ([1, 2], ["a", "b"], None, r"probabilities must be finite numbers >= 0"),
    ([1, 2], [float("nan"), 1], None, r"probabilities must be finite numbers"),
    ([1, 2], [float("inf"), 1], None, r"probabilities must be finite numbers"),
    ([1, 2], [1e308, 1e308], None, r"with a finite sum above 0"),
    ([1, 2], [0, 0], None, r"with a finite sum above 0"),
    ([1, 2], [-1, 2], None, r"probabilities must be finite numbers >= 0"),
    ([1, 2], None, None, r"candidates must be a list of ints and probs a list"),
    ("ab", [1, 1], None, r"candidates must be a list of ints"),
    ([True, 2], [1, 1], None, r"candidates must be a list of ints"),
    ([1, 2], [1, 1], True, r"decision True is not an index into 2 candidates"),
    ([1, 2], [1, 1], 2, r"decision 2 is not an index into 2 candidates"),
])
def test_sample_categorical_bad_arguments(cands, probs, decision, match):
    sch = Schedule(gemm())
    refused(sch, lambda: sch.sample_categorical(cands, probs, decision=decision), match)


# ------------------------------------------------------------ trace JSON
GOOD = None


def good_trace():
    wl = gemm()
    sch = Schedule(wl, seed=5)
    b, i, j, k = loops(sch)
    f = sch.sample_perfect_tile(i, 2, 8)
    sch.split(i, f)
    u = sch.sample_categorical([0, 16], [0.5, 0.5])
    sch.annotate(sch.get_loops(b)[0], "pragma_auto_unroll_max_step", u)
    return wl, sch


def mutate(fn):
    data = good_trace()[1].trace.as_json()
    fn(data)
    return data


def _inst(data, n, pos, value):
    data["insts"][n][pos] = value


BAD_TRACES = [   # (name, JSON text or bytes or object, pinned words)
    ("not utf-8", b'{"version": 1, "insts": [], "x": "\xff\xfe"}', r"trace is not UTF-8 text "
                                                                  r"\(bad byte at position"),
    ("200k deep", "[" * 200_000 + "]" * 200_000, r"trace nests 200000 levels of lists/objects, "
                                                 r"more than 32"),
    ("deep in a field", '{"version": 1, "insts": ' + "[" * 100 + "]" * 100 + "}",
     r"nests 101 levels"),
    ("too long", '{"version": 1, "insts": [], "pad": "' + "x" * (1 << 22) + '"}',
     r"characters, more than 4194304"),
    ("kind is a list", mutate(lambda d: _inst(d, 0, 0, ["get_block"])),
     r"instruction 0: unknown instruction \['get_block'\]"),
    ("kind is a dict", mutate(lambda d: _inst(d, 0, 0, {"a": 1})), r"unknown instruction"),
    ("split missing factors", mutate(lambda d: d["insts"][3][1].pop()),
     r"instruction 3 \(split\) takes 2 inputs \(loop, factors\), got 1"),
    ("split extra input", mutate(lambda d: d["insts"][3][1].append(3)),
     r"instruction 3 \(split\) takes 2 inputs"),
    ("split factor 2**63", mutate(lambda d: _inst(d, 3, 1, ["$l1", [None, 2 ** 63]])),
     r"integer 9223372036854775808 is beyond 64 bits"),
    ("split factor 2**40", mutate(lambda d: _inst(d, 3, 1, ["$l1", [None, 2 ** 40]])),
     r"instruction 3 \(split\) input 1: expected a list of 1 to 64 factors, each null, a "
     r"value handle or an int in \[1, 2147483647\], got \[None, 1099511627776\]"),
    ("split factor float", mutate(lambda d: _inst(d, 3, 1, ["$l1", [None, 2.5]])),
     r"input 1: expected a list of 1 to 64 factors"),
    ("string probabilities", mutate(lambda d: _inst(d, 4, 1, [[0, 16], ["a", "b"]])),
     r"instruction 4 \(sample_categorical\) input 1: expected a list of at most 4096 finite "
     r"numbers >= 0, got \['a', 'b'\]"),
    ("bool candidates", mutate(lambda d: _inst(d, 4, 1, [[True, 16], [1, 1]])),
     r"input 0: expected a non-empty list"),
    ("handle of the wrong kind", mutate(lambda d: _inst(d, 3, 1, ["$b0", [None, 2]])),
     r"input 0: expected a loop handle \(\$l\.\.\.\), got '\$b0'"),
    ("output of the wrong kind", mutate(lambda d: _inst(d, 1, 3, ["b1", "b2", "b3"])),
     r"instruction 1 \(get_loops\): bad or repeated output name 'b1'"),
    ("outputs of the wrong count", mutate(lambda d: _inst(d, 3, 3, ["l9"])),
     r"instruction 3 \(split\) must have 2 outputs, got 1"),
    ("attrs", mutate(lambda d: _inst(d, 0, 2, {"x": 1})), r"attrs must be \{\}"),
    ("version true", mutate(lambda d: d.update(version=True)), r"unknown trace version True"),
    ("version string", mutate(lambda d: d.update(version="1")), r"unknown trace version '1'"),
    ("version 2", mutate(lambda d: d.update(version=2)), r"unknown trace version 2; this "
                                                         r"version of the explorer reads"),
    ("unknown field", mutate(lambda d: d.update(extra=1)), r"unknown field\(s\) extra"),
    ("too many instructions", {"version": 1, "insts": [["get_block", ["C"], {}, [f"b{n}"]]
                                                       for n in range(4097)]},
     r"4097 instructions, more than 4096"),
    ("huge int", '{"version": 1' + "0" * 5000 + ', "insts": []}', r"is beyond 64 bits"),
    ("1e999", '{"version": 1e999, "insts": []}', r"number 1e999 overflows a float"),
    ("NaN", '{"version": NaN, "insts": []}', r"NaN is not a number JSON allows here"),
    ("decision twice", mutate(lambda d: d["decisions"].append(d["decisions"][0])),
     r"does not name a sampling instruction \(or names one twice\)"),
    ("decision index huge", mutate(lambda d: d["decisions"].__setitem__(0, [10 ** 18, [2, 8]])),
     r"does not name a sampling instruction"),
    ("categorical decision out of range", mutate(lambda d: d["decisions"][1].__setitem__(1, 2)),
     r"decision 2 of instruction 4 has the wrong type for sample_categorical or is out of "
     r"range: expected an index below 2"),
    ("tile decision too long", mutate(lambda d: d["decisions"][0].__setitem__(1, [1, 2, 8])),
     r"expected a list of 2 ints >= 1 with innermost <= 8"),
    ("annotate NaN", mutate(lambda d: _inst(d, 6, 1, ["$l9", "k", float("nan")])),
     r"NaN is not a number"),
    ("not an object", "[1, 2]", r"a trace is a JSON object"),
    ("not text", 12, r"a trace is a JSON object"),
]


@pytest.mark.parametrize("case", BAD_TRACES, ids=[c[0] for c in BAD_TRACES])
def test_bad_trace_gives_trace_error(case):
    _, data, match = case
    if isinstance(data, dict) and case[0] != "too many instructions":
        data = json.dumps(data)     # through the text path too (NaN stays the token NaN)
    with pytest.raises(TraceError, match=match):
        Trace.from_json(data)


def test_good_trace_loads_from_bytes_and_replays():
    wl, sch = good_trace()
    t = Trace.from_json(sch.trace.dumps().encode())
    again = t.apply_to(Schedule(wl))
    assert again.func == sch.func
    run_and_check(again, wl)


def test_replay_of_a_python_trace_with_wrong_arity_gives_trace_error():
    wl, sch = good_trace()
    t = sch.trace
    split = t.insts[3]
    bad = Trace(t.insts[:3] + [type(split)("split", split.inputs[:1], split.outputs)])
    with pytest.raises(TraceError, match=r"instruction 3 \(split\): wrong arguments .*"
                                         r"expected loop, factors"):
        replay(bad, Schedule(wl))
    bad = Trace([type(split)(["split"], (), ())])
    with pytest.raises(TraceError, match=r"instruction 0: unknown instruction \['split'\]"):
        replay(bad, Schedule(wl))
    with pytest.raises(TraceError, match=r"instruction 'x' is not a sampling instruction"):
        t.with_decision("x", 1)


def test_schema_knows_every_instruction_with_the_primitive_arity():
    from explorer.schedule.trace import _params
    assert set(INSTRUCTIONS) == set(KINDS)
    for kind, (types, _) in INSTRUCTIONS.items():
        params = _params(getattr(Schedule, kind))
        assert params == ["*"] if types == ("*loop",) else len(params) == len(types), kind


def test_json_depth_skips_strings_and_is_linear():
    assert json_depth('{"a": "[[[[", "b": [[1]]}') == 3
    assert json_depth('["\\\\", [[]]]') == 3
    start = time.perf_counter()
    assert json_depth('["' + '\\"' * 1_000_000) == 1       # no quadratic backtracking
    assert time.perf_counter() - start < 2
    assert parse_json('{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}


# ------------------------------------------------------------ database lines
def record(**changes):
    _, sch = good_trace()
    rec = {"workload": "gemm-16-12-8", "target": "llvm", "trace": sch.trace.as_json(),
           "run_secs": [0.001, 0.002], "error": None, "feature_version": 3,
           "strategy": "evolutionary", "round": 0, "trial": 1, "seed": 7, "predicted": 0.5,
           "build_secs": 0.1, "meta": {}, "v": 1}
    rec.update(changes)
    return rec


def test_good_record_and_retime_pass():
    validate_record(record())
    validate_record(record(run_secs=None, error="build_crash: ..."))
    validate_retime({"v": 1, "workload": "w", "target": "llvm",
                     "trace": record()["trace"], "run_secs": [0.5]})
    validate_trace_json(record()["trace"])


@pytest.mark.parametrize("changes,match", [
    ({"run_secs": [-1.0]}, r"record: field 'run_secs' must be null or a list of positive"),
    ({"run_secs": [float("inf")]}, r"field 'run_secs' must be"),
    ({"run_secs": None}, r"run_secs is null but there is no error string"),
    ({"v": 2}, r"field 'v' must be 1, got 2"),
    ({"workload": 5}, r"field 'workload' must be a workload key"),
    ({"round": 2 ** 40}, r"field 'round' must be an int >= -1"),
    ({"predicted": "fast"}, r"field 'predicted' must be null or a finite number"),
    ({"trace": {"version": 9, "insts": []}}, r"record: field 'trace': unknown trace version 9"),
    ({"trace": {"version": 1, "insts": [["get_block", ["C"], {}, ["b0"]],
                                        ["get_loops", ["$b0"], {}, ["l1"]],
                                        ["sample_perfect_tile", ["$l1", 2000, 64], {}, []]]}},
     r"record: field 'trace': instruction 2 \(sample_perfect_tile\) input 1: expected an int "
     r"in \[1, 16\], got 2000"),
])
def test_bad_record_gives_database_error(changes, match):
    with pytest.raises(DatabaseError, match=match):
        validate_record(record(**changes))


def test_bad_record_lines_give_database_error():
    with pytest.raises(DatabaseError, match=r"a line must be a JSON object"):
        validate_record([1])
    with pytest.raises(DatabaseError, match=r"field 'trace' is missing"):
        validate_record({k: v for k, v in record().items() if k != "trace"})
    with pytest.raises(DatabaseError, match=r"re-timing: field 'run_secs' must be a list"):
        validate_retime({"v": 1, "workload": "w", "target": "t", "trace": record()["trace"],
                         "run_secs": [0]})
    with pytest.raises(DatabaseError, match=r"line JSON is malformed"):
        parse_json(b'{"v": 1,', "line", error=DatabaseError)


def test_primitive_signatures_unchanged_by_the_atomic_wrapper():
    assert list(inspect.signature(Schedule.tile).parameters) == ["self", "loops", "factors"]


def test_widget_trace_loading_refuses_hostile_text_and_keeps_the_schedule():
    from widgets import ExplorerState
    wl, sch = good_trace()
    st = ExplorerState(wl, target="interp")
    before = st.schedule.func
    for text, error in ((b"\xff", TraceError), ("[" * 100_000, TraceError),
                        (sch.trace.dumps().replace('"C"', '"D"'), ScheduleError)):
        with pytest.raises(error):
            st.load_trace(text)
        assert st.schedule.func == before
    st.load_trace(sch.trace.dumps())
    assert st.schedule.func == sch.func
    run_and_check(st.schedule, wl)
