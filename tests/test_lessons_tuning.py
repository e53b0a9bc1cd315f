"""Lessons 04 (cost models), 05 (auto-tuning) and 07 (extending the search space) run
top to bottom on a fresh kernel in short mode and show what their text says:
the model learning from the example database, tuned kernels checked against
numpy, a user's rule and mutator changing the space."""
from __future__ import annotations

import json
import re

import pytest

from explorer import Target

pytest.importorskip("nbclient")
from test_notebooks import executed, outputs, text_of  # noqa: E402  (one run per session)

pytestmark = pytest.mark.slow      # each lesson runs its tuner for real (~1 min each)


def _run(name: str):
    """The notebook executed in short mode (shared with tests/test_notebooks.py)."""
    return executed(name)[0]


def _count(nb, mime: str) -> int:
    return sum(mime in o.get("data", {}) and bool(o["data"][mime]) for o in outputs(nb))


def _no_errors(nb) -> None:
    errors = [f"{o['ename']}: {o['evalue']}" for o in outputs(nb) if o["output_type"] == "error"]
    assert errors == []


def _floats(pattern: str, text: str) -> list:
    return [float(x) for x in re.findall(pattern, text)]


def test_04_the_cost_model_learns_from_the_example_database():
    nb = _run("04_cost_models.ipynb")
    _no_errors(nb)
    text = text_of(nb)
    assert f"this machine: {Target('llvm').describe()}" in text
    from explorer.suites import example_database_path
    machine = json.loads((example_database_path() / "machine.json").read_text())
    assert f"measured on: {machine['describe']}" in text
    from explorer.features import NUM_FEATURES
    assert f"{NUM_FEATURES} features per store" in text
    acc = dict(zip(_floats(r"trained on\s+(\d+): rank accuracy", text),
                   _floats(r"trained on\s+\d+: rank accuracy ([\d.]+)", text)))
    assert set(acc) >= {8, 16, 32, 48}
    assert 0.3 < acc[8] < 0.7 and 0.3 < acc[16] < 0.7     # fewer than 32 samples: random
    assert min(acc[32], acc[48]) > 0.65                     # trained: it ranks
    assert max(acc.values()) > acc[8] + 0.15               # the curve rises
    trees = _floats(r"trees alone ([\d.]+)", text)          # no prior: learned from records
    assert len(trees) == len(acc) and max(trees) > 0.65
    assert "top-8 recall" in text and "the cycle estimate alone" in text
    alone = _floats(r"C6 records: alone ([\d.]+)", text)
    transfer = _floats(r"after C9's \d+ records ([\d.]+)", text)
    assert len(alone) == len(transfer) >= 3
    assert transfer[0] > 0.6                                # C9's records rank C6 at once
    carried = _floats(r"trained on C9's records only ([\d.]+)", text)
    assert len(carried) == 1 and carried[0] > 0.6          # the trees themselves transfer
    rounds = re.findall(r"round \d+: \d+ samples after it; rank accuracy", text)
    assert rounds                                           # the live tuner's model
    live = _floats(r"ranks the example database's \d+ C9 records at ([\d.]+)", text)
    assert len(live) == 1 and live[0] > 0.6                 # what the live run's model knows
    assert _count(nb, "image/png") >= 5
    assert _count(nb, "application/vnd.jupyter.widget-view+json") >= 2


def test_05_tunes_an_operator_and_a_suite_resumes_and_applies_the_best():
    nb = _run("05_auto_tuning.ipynb")
    _no_errors(nb)
    text = text_of(nb)
    assert f"this machine: {Target('llvm').describe()}" in text
    # a sampled candidate may fail (seed 0's replay draws one whose LLVM build exceeds the
    # 30 s build timeout: a failed candidate, recorded, not an error); most must not
    measured, failed = map(int, re.search(r"(\d+) measured, (\d+) failed, best [\d.]+ GFLOP/s",
                                          text).groups())
    assert measured >= 4 and failed <= measured // 4
    assert re.search(r"numpy\s+[\d.]+ GFLOP/s", text)
    torch = re.search(r"torch\s+[\d.]+ GFLOP/s", text)
    assert torch or "PyTorch is not installed: skipped" in text
    stopped = int(re.search(r"stopped: (\d+) records on disk", text).group(1))
    trials, measured = map(int, re.search(
        r"resumed: (\d+) trials in the database, (\d+) measured by this run", text).groups())
    assert stopped > 0 and measured > 0 and trials == stopped + measured
    suite = re.findall(r"(C\d+)\s+(\d+) trials, best\s+([\d.]+) GFLOP/s, numpy\s+([\d.]+)", text)
    assert [s[0] for s in suite] == ["C9", "C12"]
    assert sum(int(s[1]) for s in suite) == 8
    assert len(re.findall(r"C(?:9|12): correct \(max abs error [\d.e+-]+\)", text)) == 2
    assert re.search(r"here: [\d.]+ GFLOP/s .* numpy here: [\d.]+ GFLOP/s", text)
    assert "rebuilt from the database and checked: max abs error" in text
    assert _count(nb, "image/png") >= 2
    assert _count(nb, "application/vnd.jupyter.widget-view+json") >= 1


def test_07_a_user_rule_and_mutator_change_the_space_and_the_tuning():
    nb = _run("07_extend_the_search_space.ipynb")
    _no_errors(nb)
    text = text_of(nb)
    assert "1 sketch(es), decision space 1 (1)" in text       # the default: one program
    assert "1 sketch(es), decision space 49 (49)" in text     # 7 x 7 tilings of 1024
    assert text.count("- max abs error 0.0") == 2
    parent = json.loads(re.search(r"sampled: (\[\[.*\]\])", text).group(1))
    children = [json.loads(c) for c in re.findall(r"child: (\[\[.*\]\])", text)]
    assert len(children) == 4
    for child in children:                                   # one tiling: a factor 2 moved
        changed = [(p, c) for p, c in zip(parent, child) if p != c]
        assert len(changed) == 1, (parent, child)
        before, after = changed[0]
        assert sorted(a / b for a, b in zip(after, before)) == [0.5, 2.0]
        assert all(a * b == 1024 for a, b in child)
    assert re.search(r"DoubleOrHalveTile\(\)\s+weight 0.5", text)
    runs = dict(re.findall(r"(default space|\+ TileSpatial2D|\+ rule \+ DoubleOrHalveTile)\s+"
                           r"(\d+) measured", text))
    assert set(runs) == {"default space", "+ TileSpatial2D", "+ rule + DoubleOrHalveTile"}
    assert int(runs["default space"]) <= 2                    # nothing else to measure
    assert int(runs["+ TileSpatial2D"]) == int(runs["+ rule + DoubleOrHalveTile"]) == 8
    assert "for i_0 in parallel(" in text and "x faster than the default space" in text
    assert _count(nb, "image/png") >= 1
