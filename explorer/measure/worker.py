"""The worker process: reads job lines on stdin, answers with JSON lines.

Started by ``WorkerPool`` as ``python -m explorer.measure.worker --handlers
MODULE[,MODULE...]``; each module has a ``HANDLERS`` dict of job kind ->
``handler(payload, emit) -> dict``. Only plain JSON crosses the pipe in either
direction. The original stdout is kept for the protocol and fd 1 is pointed at
stderr, so whatever a kernel or a library prints cannot corrupt it;
``faulthandler`` writes the Python stack to stderr if a kernel crashes the
process, and the pool shows its tail in the error.
"""
from __future__ import annotations

import argparse
import faulthandler
import importlib
import json
import os
import sys
import threading
import time
import traceback


def _channel():
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(msg: dict) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()
    return send


def _load(modules: str) -> dict:
    handlers: dict = {}
    for name in filter(None, modules.split(",")):
        handlers.update(importlib.import_module(name).HANDLERS)
    return handlers


def serve(handlers: dict, send) -> None:
    """Answer jobs until stdin closes."""
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        jid = job.get("id")

        def emit(event: str, **data):
            send({"id": jid, "event": event, **data})
        handler = handlers.get(job.get("kind"))
        if handler is None:
            emit("done", error=f"this worker has no handler for job kind {job.get('kind')!r}; "
                 f"it knows {sorted(handlers)}", error_kind="internal")
            continue
        try:
            result = handler(job.get("payload", {}), emit)
        except Exception as e:  # a handler bug must not take down the worker
            tail = "".join(traceback.format_exception(e)[-4:])
            emit("done", error=f"worker job {job.get('kind')!r} failed: {e!r}\n{tail}",
                 error_kind="internal")
            continue
        emit("done", result=result)


def _watch_parent(interval: float = 1.0) -> None:
    """Exit when the parent process is gone (a killed notebook must not leave a worker
    spinning in a hung kernel: kernels called through ctypes release the GIL, so this
    thread still runs)."""
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(3)
    threading.Thread(target=watch, name="explorer-parent-watch", daemon=True).start()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m explorer.measure.worker")
    ap.add_argument("--handlers", default="explorer.measure.jobs")
    args = ap.parse_args(argv)
    send = _channel()
    faulthandler.enable()
    _watch_parent()
    handlers = _load(args.handlers)
    send({"event": "ready", "pid": os.getpid()})
    serve(handlers, send)


if __name__ == "__main__":
    main()
