"""The ``explorer`` command line.

Each subcommand lives in its own module, which provides ``add_arguments(parser)``
and ``main(args) -> int``; add one by adding a line to ``SUBCOMMANDS``. A
subcommand signals a usage mistake (unknown case, bad shape...) by raising
``UsageError``: the command then prints one line, ``explorer CMD: error: MESSAGE
(for usage: explorer CMD --help)``, and exits with status 2, as argparse does for
its own errors (which print the same one line). Other engine errors exit with
status 1 and their message on one line; no traceback for either (set
``EXPLORER_DEBUG=1`` to see one for an unexpected error).

What a command will write (``--db``, ``--json``) and what a workload needs
(memory, 64-bit indices) is checked here, before any work starts, by
``check_writable_dir``, ``check_writable_file`` and ``check_fits``.
"""
from __future__ import annotations

import argparse
import importlib
import math
import os
import re
import sys
import tempfile
import warnings

from .errors import ExplorerError

# name -> (module, one-line help)
SUBCOMMANDS = {
    "tune": ("explorer.tune_cmd", "tune an operator or a suite and keep the best schedules"),
    "show": ("explorer.show_cmd", "print the best schedule per workload in a tuning database"),
    "demo": ("explorer.demo", "schedule a matmul by hand, run it, print the loop nest"),
    "bench": ("explorer.bench", "measure our kernels against numpy and PyTorch on named "
              "workloads"),
}


class UsageError(ExplorerError):
    """The command line asked for something that does not exist or cannot be."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr (status 2), and which reads
    ``--shape -1,64,64`` as a (bad) value rather than as an unknown option."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._negative_number_matcher = re.compile(r"^-\d[\d.,]*$")

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (for usage: {self.prog} "
                  "--help)\n")


def one_line(text) -> str:
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())


def build_parser() -> tuple:
    """(the top parser, {subcommand name: its parser})."""
    parser = Parser(prog="explorer", description="Schedule Explorer: explore, teach and tune "
                    "tensor-program schedules.")
    from . import __version__
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    parsers = {}
    for name, (module, help_text) in SUBCOMMANDS.items():
        mod = importlib.import_module(module)
        sp = subs.add_parser(name, help=help_text, description=(mod.__doc__ or help_text).split(
            "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(sp)
        sp.set_defaults(_module=mod)
        parsers[name] = sp
    return parser, parsers


def main(argv=None) -> int:
    """Entry point of the ``explorer`` console script."""
    parser, parsers = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        print(f"explorer: error: no command given: use one of {', '.join(SUBCOMMANDS)}, e.g. "
              "explorer tune --help", file=sys.stderr)
        return 2
    with warnings.catch_warnings():
        warnings.showwarning = _warning_printer(args.command)
        return _run(args, parsers[args.command])


def _warning_printer(command: str):
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"explorer {command}: warning: {one_line(message)}", file=sys.stderr)
    return show


def _run(args, subparser) -> int:
    name = f"explorer {args.command}"
    try:
        return int(args._module.main(args) or 0)
    except UsageError as e:
        subparser.error(str(e))
    except ExplorerError as e:
        return _fail(f"{name}: {one_line(e)}")
    except KeyboardInterrupt:
        return _fail(f"{name}: interrupted", 130)
    except MemoryError:
        return _fail(f"{name}: out of memory: use a smaller --shape or fewer workloads")
    except OSError as e:
        where = f" {e.filename}" if e.filename else ""
        return _fail(f"{name}: cannot use{where}: {e.strerror or e}")
    except Exception as e:  # a bug: one line unless asked for the traceback
        if os.environ.get("EXPLORER_DEBUG"):
            raise
        return _fail(f"{name}: internal error {type(e).__name__}: {one_line(e)[:300]} "
                     "(please report it; EXPLORER_DEBUG=1 shows the traceback)")


def _fail(line: str, status: int = 1) -> int:
    print(line, file=sys.stderr)
    return status


# ------------------------------------------------------------------ checks before work

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


if __name__ == "__main__":
    # run through the imported module, so that subcommands raising explorer.cli.UsageError
    # are caught here too
    from explorer.cli import main as _main
    sys.exit(_main())
