"""A pool of persistent worker processes that may crash or hang without harm.

Each ``Worker`` is a fresh interpreter (``python -m explorer.measure.worker``:
spawn semantics, nothing inherited but the environment, no re-import of the
caller's ``__main__``, so it works from scripts, notebooks and the CLI alike)
that talks JSON lines over its stdin/stdout. The caller waits on it with a
deadline; a worker that dies or overruns is killed and replaced by a fresh one
(its ``generation`` goes up), and the job becomes a failed value. Workers start
in the background and are waited for only when first used, so a replacement
costs little when the next job comes.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

from ..errors import MeasureError

STARTUP_TIMEOUT = 120.0


class WorkerDied(Exception):
    """The worker process exited (crash, kill, or a failed start: ``at_start``)."""
    phase = None

    def __init__(self, message: str, at_start: bool = False):
        super().__init__(message)
        self.at_start = at_start


class WorkerTimeout(Exception):
    """No message arrived before the deadline."""
    phase = None


def _package_root() -> str:
    """The directory that holds the ``explorer`` package (this file is explorer/measure/)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def worker_env(set_vars: dict | None = None, unset: tuple = ()) -> dict:
    """This process's environment with ``set_vars`` set and ``unset`` removed, and
    PYTHONPATH reaching this explorer package (also from a source checkout)."""
    env = dict(os.environ)
    for name in unset:
        env.pop(name, None)
    env.update({k: str(v) for k, v in (set_vars or {}).items()})
    root = _package_root()
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in paths if p != root])
    return env


def describe_exit(code) -> str:
    if code is None:
        return "is still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        extra = " (segmentation fault)" if name == "SIGSEGV" else ""
        return f"was killed by {name}{extra}"
    return f"exited with status {code}"


class Worker:
    """One worker process; ``request`` runs a job on it with deadlines."""

    def __init__(self, index: int, handlers: str, env: dict):
        self.index = index
        self.handlers = handlers
        self.env = env
        self.generation = 0
        self.proc: subprocess.Popen | None = None
        self.ready = False
        self._buf = b""
        self._msgs: list = []
        self._next_id = 0
        self._err = tempfile.TemporaryFile()
        self.start()

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._err.seek(0)
        self._err.truncate()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "explorer.measure.worker", "--handlers", self.handlers],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, env=self.env,
            close_fds=True)
        self.generation += 1
        self.ready = False
        self._buf, self._msgs = b"", []

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass

    def restart(self) -> None:
        self.kill()
        self.start()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self._err.close()

    def stderr_tail(self, limit: int = 1500) -> str:
        self._err.flush()
        size = self._err.seek(0, os.SEEK_END)
        self._err.seek(max(0, size - limit))
        return self._err.read().decode(errors="replace").strip()

    def death_note(self) -> str:
        code = self.proc.wait() if self.proc else None
        tail = self.stderr_tail()
        return f"the worker process {describe_exit(code)}" + (f"; its last output:\n{tail}"
                                                               if tail else "")

    # ------------------------------------------------------------ messages
    def fileno(self) -> int:
        return self.proc.stdout.fileno()

    def _fill(self, timeout: float) -> None:
        r, _, _ = select.select([self.proc.stdout], [], [], max(0.0, timeout))
        if not r:
            return
        chunk = os.read(self.fileno(), 1 << 16)
        if not chunk:
            raise WorkerDied(self.death_note())
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        self._msgs.extend(json.loads(line) for line in lines if line.strip())

    def poll(self) -> dict | None:
        """The next message if one has arrived, else None (never blocks)."""
        if not self._msgs:
            self._fill(0.0)
        return self._msgs.pop(0) if self._msgs else None

    def read(self, deadline: float) -> dict:
        """The next message, waiting until ``deadline`` (a ``time.monotonic()`` value)."""
        while not self._msgs:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerTimeout()
            self._fill(left)
        return self._msgs.pop(0)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> None:
        if self.ready:
            return
        try:
            msg = self.read(time.monotonic() + timeout)
        except WorkerTimeout:
            self.kill()
            raise WorkerDied(f"the worker did not start within {timeout:.0f} s; "
                             f"{self.stderr_tail()}", at_start=True) from None
        except WorkerDied as e:
            raise WorkerDied(f"the worker did not start: {e}", at_start=True) from None
        if msg.get("event") != "ready":
            raise WorkerDied(f"the worker sent {msg!r} before it was ready", at_start=True)
        self.ready = True

    def started(self) -> bool:
        """Whether the worker is ready for jobs, without waiting (its ready message is
        read if it has come; a dead worker is not started)."""
        if not self.ready and not self._msgs:
            try:
                self._fill(0.0)
            except WorkerDied:
                return False
        if not self.ready and self._msgs and self._msgs[0].get("event") == "ready":
            self._msgs.pop(0)
            self.ready = True
        return self.ready

    def send(self, kind: str, payload: dict) -> int:
        self.wait_ready()
        self._next_id += 1
        line = json.dumps({"id": self._next_id, "kind": kind, "payload": payload}) + "\n"
        try:
            self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerDied(self.death_note()) from None
        return self._next_id

    def call(self, kind: str, payload: dict, timeout, on_event=None) -> dict:
        """Run one job and return its ``done`` message.

        ``timeout(event, msg)`` gives the seconds allowed until the next message
        after ``event`` (None when the job was just sent): a job reports its
        stages, and each stage gets its own deadline. Raises ``WorkerTimeout`` or
        ``WorkerDied`` with ``.phase``, the last stage reached; the caller then
        restarts the worker.
        """
        self.wait_ready()
        jid = self.send(kind, payload)
        phase, msg = None, None
        deadline = time.monotonic() + timeout(None, None)
        while True:
            try:
                msg = self.read(deadline)
            except (WorkerTimeout, WorkerDied) as e:
                e.phase = phase
                raise
            if msg.get("id") != jid:
                continue
            if msg.get("event") == "done":
                return msg
            phase = msg.get("event")
            if on_event is not None:
                on_event(msg)
            deadline = time.monotonic() + timeout(phase, msg)


def wait_any(workers: list, timeout: float) -> None:
    """Block until one of ``workers`` has a message (buffered or on its pipe) or
    ``timeout`` seconds pass."""
    if any(w._msgs for w in workers) or not workers:
        return
    select.select([w.proc.stdout for w in workers], [], [], max(0.0, timeout))


class Closing:
    """``with`` support for an object that ends its worker processes in ``close()``."""

    def close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class PoolOwner(Closing):
    """An object that measures in its ``self.pool``: closing it closes the pool."""

    def close(self) -> None:
        self.pool.close()


class WorkerPool(Closing):
    """``size`` workers running ``handlers`` (comma-separated module names), in
    an environment of this one with ``env`` set and ``unset_env`` removed."""

    def __init__(self, size: int = 1, handlers: str = "explorer.measure.jobs",
                 env: dict | None = None, unset_env: tuple = ()):
        if size < 1:
            raise MeasureError(f"a worker pool needs at least one worker, not {size}")
        self.env = worker_env(env, unset_env)
        self.workers = [Worker(i, handlers, self.env) for i in range(size)]
        self.closed = False

    def __len__(self) -> int:
        return len(self.workers)

    def __getitem__(self, i: int) -> Worker:
        if self.closed:
            raise MeasureError("this worker pool is closed: make a new one")
        return self.workers[i]

    def restart(self, i: int) -> None:
        self.workers[i].restart()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            for w in self.workers:
                w.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
