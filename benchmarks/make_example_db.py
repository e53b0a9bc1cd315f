"""Make the example tuning database shipped in ``data/example_db/`` (or redo it on
your machine into another folder).

It runs the project's own tuner, ``explorer tune``, on a few tasks of the shipped
suites (ResNet-18 C6 and C9, BERT-base's 128x768x768 projection GEMM), a fixed
number of trials each with a fixed seed, and writes ``machine.json`` beside the
records: the machine that measured them (``Target("llvm").describe()``, its
target string, versions), the commands, and the date.

    python3 benchmarks/make_example_db.py --out my_example_db     # 208 trials
    python3 benchmarks/make_example_db.py --out data/example_db   # what is shipped

The trial counts go past the cost model's 32 samples (below that it scores at
random), so a lesson can show it learning from these records.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

# (suite, task name, trials): enough trials for the model to learn (>= 32, several rounds)
TASKS = (("resnet18", "C6", 96), ("resnet18", "C9", 64), ("bert_base", "qkv_out_proj", 48))
BATCH = 16
SEED = 0


def tune_command(suite: str, name: str, trials: int, out: str) -> list:
    """The ``explorer tune`` command line for one task of a shipped suite."""
    from explorer import ops
    from explorer.suites import suite_tasks
    task = next(t for t in suite_tasks(suite) if t["name"] == name)
    spec = ops.registry[task["op"]]
    shape = ",".join(str(task["params"][n]) for n in spec.param_names)
    extra = [f"--param={k}={v}" for k, v in task["params"].items() if k not in spec.param_names]
    return ["explorer", "tune", "--op", task["op"], "--shape", shape, *extra,
            "--trials", str(trials), "--batch-size", str(BATCH), "--seed", str(SEED),
            "--db", out, "--quiet"]


def machine(commands: list) -> dict:
    """What measured the records: the host as LLVM sees it, versions, the commands."""
    import llvmlite
    import numpy
    import xgboost
    from explorer import Target
    host = Target("llvm")
    return {"describe": host.describe(), "target": str(host), "vector_lanes": host.vector_lanes,
            "num_cores": host.num_cores, "python": platform.python_version(),
            "numpy": numpy.__version__, "llvmlite": llvmlite.__version__,
            "xgboost": xgboost.__version__, "platform": platform.platform(),
            "load_average": [round(x, 1) for x in os.getloadavg()],   # a shared machine is noisy
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commands": [" ".join(c) for c in commands]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="database folder to create; an interrupted "
                   "run resumes when started again with the same folder")
    args = p.parse_args(argv)
    out = Path(args.out)
    commands = [tune_command(s, n, t, str(out)) for s, n, t in TASKS]
    exe = shutil.which("explorer") or "explorer"
    for cmd in commands:
        print(" ".join(cmd), flush=True)
        subprocess.run([exe, *cmd[1:]], check=True)
    (out / "machine.json").write_text(json.dumps(machine(commands), indent=1) + "\n")
    print(f"wrote {out} ({sum(1 for _ in open(out / 'records.jsonl'))} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
