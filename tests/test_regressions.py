"""Saved failing cases: every JSON in tests/regressions/ replays and passes every property.

A case is a workload (operator, parameters, dtype), a schedule seed and a trace,
written by the property tests (the shrunk example of a failure), by
``benchmarks/property_run.py``, or by hand for a bug report. Its ``last_call``,
when set, is the call after the trace that went wrong (``[primitive, inputs]``,
handles named as in the trace): it must now work, or raise an ExplorerError that
leaves the schedule unchanged. Then the schedule replays from its trace's JSON, and equals numpy on
the interpreter and on LLVM with NaN-filled outputs (``tests/properties.py``).
"""
from __future__ import annotations

import json

import pytest

from properties import REGRESSIONS, replay_regression

CASES = sorted(REGRESSIONS.glob("*.json"))
# Cases whose bug is not fixed yet: file name -> what is wrong (none at present).
KNOWN_FAILING: dict = {}


def _param(path):
    marks = ([pytest.mark.xfail(reason=KNOWN_FAILING[path.stem], strict=False)]
             if path.stem in KNOWN_FAILING else [])
    return pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", [_param(p) for p in CASES])
def test_regression_case(path):
    doc = json.loads(path.read_text())
    assert replay_regression(path, fork=True) in ("ran", "too_big"), doc["description"]


def test_the_issue_13_cases_are_kept():
    """The cases issue 13 reported, saved by hand, stay in the directory."""
    names = {p.stem for p in CASES}
    assert {"row_sum_rfactor_after_overshooting_split", "gemm_k5_rfactor_after_split_by_8",
            "row_sum_compute_at_of_rfactor_block"} <= names
