"""Start a measurement worker for a Dask scheduler: one per machine that measures.

    dask scheduler                              # on one machine; it listens on port 8786
    explorer worker --scheduler HOST:8786       # on each machine that measures
    explorer tune --op gemm --trials 256 --runner dask://HOST:8786

The worker detects its target (this CPU, its vector width, its cores; add
``--target cuda`` on a GPU machine: its architecture is read from the device) and declares the Dask resources
``measure=1`` and one tag per target (``llvm-znver4-avx512``), so it measures one
candidate at a time, and only for its targets. It runs under a Dask nanny (a
worker process that dies is started again) and rejoins the scheduler when that
restarts; Ctrl-C stops it. Needs the dask extra (``pip install -e '.[dask]'``).
"""
from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys

from ..errors import ExplorerError, MeasureError, UsageError


def add_arguments(p) -> None:
    p.add_argument("--scheduler", required=True, metavar="HOST:PORT",
                   help="the Dask scheduler's address, e.g. 10.0.0.5:8786 (tcp://... works too)")
    p.add_argument("--target", action="append", default=None, metavar="TARGET",
                   help="a target this machine measures for (default llvm: this CPU, "
                        "detected); repeat for several, e.g. --target llvm --target cuda")
    p.add_argument("--name", default=None, help="the worker's name on the scheduler")
    p.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECS",
                   help="how long to try to reach the scheduler (default 30)")
    p.add_argument("--once", action="store_true", help="exit when the scheduler goes away "
                   "instead of waiting for it to come back")
    p.add_argument("--verbose", action="store_true", help="show Dask's own log lines")


def scheduler_from_args(text: str) -> str:
    """``tcp://HOST:PORT`` from ``HOST:PORT``, ``tcp://HOST:PORT`` or ``dask://HOST:PORT``."""
    from ..measure.runner_choice import parse_runner
    rest = text.split("://", 1)[1] if text.startswith(("tcp://", "dask://")) else text
    try:
        return parse_runner(f"dask://{rest}")
    except ExplorerError:
        raise UsageError(f"--scheduler {text!r} is not an address: give HOST:PORT, e.g. "
                         "10.0.0.5:8786 (dask scheduler prints it when it starts)") from None


def targets_from_args(texts) -> list:
    """The targets to serve, each checked buildable on this machine."""
    from ..backends import check_buildable
    from ..target import as_target
    targets = []
    for text in texts or ["llvm"]:
        try:
            t = as_target(text)
        except ExplorerError as e:
            raise UsageError(f"--target {text!r}: {e}") from None
        check_buildable(t)
        targets.append(_with_device_arch(t, text))
    return targets


_ARCH = "from explorer.backends.cuda.runtime import device_arch; print(device_arch())"


def _with_device_arch(target, text: str):
    """A cuda target given without ``-arch`` gets this machine's GPU's architecture
    (asked in a child process, so this one holds no CUDA context)."""
    from ..errors import BuildError
    from ..target import as_target
    if target.kind != "cuda" or "-arch" in text:
        return target
    p = subprocess.run([sys.executable, "-c", _ARCH], capture_output=True, text=True,
                       timeout=120)
    arch = p.stdout.strip()
    if p.returncode != 0 or not arch.startswith("sm_"):
        why = (p.stderr.strip().splitlines() or ["no answer"])[-1]
        raise BuildError(f"--target {text!r}: the CUDA device's architecture cannot be read "
                         f"here ({why}); give it, e.g. --target 'cuda -arch=sm_90'")
    return as_target(f"{text} -arch={arch}")


def main(args) -> int:
    from ..measure.dask_jobs import target_tag, worker_resources
    from ..measure.dask_runner import import_distributed
    address = scheduler_from_args(args.scheduler)
    if not args.connect_timeout > 0:
        raise UsageError("--connect-timeout must be a positive number of seconds")
    import_distributed()
    targets = targets_from_args(args.target)
    resources = worker_resources(targets)
    for t in targets:
        say(f"measuring for {t} ({t.describe()}), tag {target_tag(t)}")
    say(f"joining {address} with resources "
        f"{', '.join(f'{k}={v}' for k, v in resources.items())} (Ctrl-C stops)")
    signal.signal(signal.SIGTERM, _stop)      # `kill`, a service manager: stop as on Ctrl-C
    asyncio.run(_serve(address, resources, args))
    return 0


def _stop(signum, frame):
    raise KeyboardInterrupt


def say(text: str) -> None:
    print(f"explorer worker: {text}", file=sys.stderr, flush=True)


async def _serve(address: str, resources: dict, args) -> None:
    """Run a nanny (and its worker) until Ctrl-C; join again after the scheduler left."""
    from distributed import Nanny
    joined = False
    quiet = logging.INFO if args.verbose else logging.WARNING
    logging.getLogger("distributed").setLevel(quiet)
    while True:
        try:
            async with Nanny(address, nthreads=1, resources=resources, name=args.name,
                             death_timeout=args.connect_timeout, silence_logs=quiet) as nanny:
                joined = True
                say(f"joined as {nanny.worker_address}")
                await nanny.finished()
        except (OSError, TimeoutError, asyncio.TimeoutError, RuntimeError) as e:
            if not joined:
                raise MeasureError(f"cannot reach the Dask scheduler at {address} within "
                                   f"{args.connect_timeout:g} s ({e}): is `dask scheduler` "
                                   "running there, and its port open from here?") from None
        if args.once:
            say("the scheduler went away; exiting (--once)")
            return
        say("the scheduler went away; trying to join it again")
        await asyncio.sleep(1.0)
