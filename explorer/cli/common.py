"""What the commands share: one-line messages, and the checks made before any work
starts (what a command will write, ``--db`` and ``--json``; what a workload needs,
memory and 64-bit indices). Each check raises ``UsageError`` naming what to fix, and
creates nothing."""
from __future__ import annotations

import math
import os
import tempfile

from ..errors import UsageError


def one_line(text) -> str:
    """``text`` with its lines joined by ``"; "``: a message fit for one line of stderr."""
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())


def check_writable_dir(path, option: str = "--db") -> None:
    """Raise UsageError unless ``path`` is, or can be created as, a directory whose
    files can be appended to. Creates nothing (a probe file is removed at once)."""
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise UsageError(f"{option} {path}: is a file, not a directory; give a directory "
                             "(it is created if missing)")
        _probe_dir(path, option, path)
        for name in ("workloads.jsonl", "records.jsonl", "retimes.jsonl"):
            _check_appendable(os.path.join(path, name), option)
        return
    parent = _existing_ancestor(path)
    if not os.path.isdir(parent):
        raise UsageError(f"{option} {path}: {parent} is a file, so no directory can be made "
                         "under it; give another path")
    _probe_dir(parent, option, path)


def check_writable_file(path, option: str = "--json") -> None:
    """Raise UsageError unless ``path`` can be written as a file; creates nothing."""
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a directory; give a file name")
    if os.path.exists(path):
        _check_appendable(path, option)
        return
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise UsageError(f"{option} {path}: the directory {parent} does not exist; create it "
                         "first or give another path")
    _probe_dir(parent, option, path)


def _existing_ancestor(path: str) -> str:
    while not os.path.exists(path):
        up = os.path.dirname(path)
        if up == path:
            break
        path = up
    return path


def _probe_dir(directory: str, option: str, asked: str) -> None:
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        raise UsageError(f"{option} {asked}: cannot write in {directory} ({e.strerror or e}); "
                         "give a path you can write") from None


def _check_appendable(path: str, option: str) -> None:
    if not os.path.exists(path):
        return
    if not os.path.isfile(path):
        raise UsageError(f"{option}: {path} is not a regular file; move it away or give "
                         "another path")
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        raise UsageError(f"{option}: cannot write {path} ({e.strerror or e}); give a path you "
                         "can write") from None


INDEX_LIMIT = 2 ** 63   # kernels index buffers with signed 64-bit integers
MEMORY_COPIES = 3       # measuring keeps the inputs, the reference output and a fresh copy


def buffer_bytes(wl) -> int:
    """Bytes of all the workload's parameter and allocated buffers."""
    import numpy as np
    func = getattr(wl, "func", None)
    bufs = tuple(getattr(func, "params", ())) + tuple(getattr(func, "alloc_buffers", ()))
    return sum(math.prod(b.shape) * np.dtype(b.dtype).itemsize for b in bufs)


def check_fits(wl, hint: str = "use a smaller --shape") -> None:
    """Raise UsageError if ``wl``'s buffers overflow 64-bit indices or do not fit in the
    memory available now (``MEMORY_COPIES`` times over)."""
    import numpy as np
    for b in getattr(getattr(wl, "func", None), "params", ()):
        if math.prod(b.shape) * np.dtype(b.dtype).itemsize >= INDEX_LIMIT:
            raise UsageError(f"{wl.key}: buffer {b.name} of shape {tuple(b.shape)} overflows "
                             f"the 64-bit index type of the kernels; {hint}")
    need = MEMORY_COPIES * buffer_bytes(wl)
    avail = available_memory()
    if avail is not None and need > avail:
        raise UsageError(f"{wl.key} needs about {_gib(need)} of memory to be measured (its "
                         f"buffers, {MEMORY_COPIES} copies) but {_gib(avail)} is available; "
                         f"{hint}")


def available_memory() -> int | None:
    """Bytes of memory available now: /proc/meminfo's MemAvailable (or sysconf), capped by a
    cgroup v2 limit; None if unknown."""
    avail = _meminfo_available()
    limit = _cgroup_room()
    if limit is not None:
        avail = limit if avail is None else min(avail, limit)
    return avail


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_room() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read())
        return None if limit == "max" else max(0, int(limit) - used)
    except (OSError, ValueError):
        return None


def _gib(n: int) -> str:
    return f"{n / 2 ** 30:.3g} GiB" if n >= 2 ** 30 else f"{n / 2 ** 20:.3g} MiB"
