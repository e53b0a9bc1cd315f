"""The ``explorer`` command line: one module per command, on the engine's API.

Each subcommand lives in its own module of this package (``tune``, ``show``,
``demo``, ``bench``, ``worker``), which provides ``add_arguments(parser)`` and
``main(args) -> int``; add one by adding a line to ``SUBCOMMANDS``. A
subcommand signals a usage mistake (unknown case, bad shape...) by raising
``explorer.errors.UsageError``: the command then prints one line,
``explorer CMD: error: MESSAGE (for usage: explorer CMD --help)``, and exits
with status 2, as argparse does for its own errors (which print the same one
line). Other engine errors exit with
status 1 and their message on one line; no traceback for either (set
``EXPLORER_DEBUG=1`` to see one for an unexpected error).

What a command will write (``--db``, ``--json``) and what a workload needs
(memory, 64-bit indices) is checked before any work starts, by the helpers of
``explorer.cli.common``; an operator and its shape given as text are read by
``explorer.cli.workload_text``, the same for every command.
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import warnings

from ..errors import ExplorerError, UsageError
from .common import one_line

# name -> (module, one-line help)
SUBCOMMANDS = {
    "tune": ("explorer.cli.tune", "tune an operator or a suite and keep the best schedules"),
    "show": ("explorer.cli.show", "print the best schedule per workload in a tuning database"),
    "demo": ("explorer.cli.demo", "schedule a matmul by hand, run it, print the loop nest"),
    "bench": ("explorer.cli.bench", "measure our kernels against numpy and PyTorch on named "
              "workloads"),
    "worker": ("explorer.cli.worker", "serve a Dask scheduler as a measurement worker for "
               "this machine's target"),
}


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr (status 2), and which reads
    ``--shape -1,64,64`` as a (bad) value rather than as an unknown option."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._negative_number_matcher = re.compile(r"^-\d[\d.,]*$")

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (for usage: {self.prog} "
                  "--help)\n")


def build_parser() -> tuple:
    """(the top parser, {subcommand name: its parser})."""
    parser = Parser(prog="explorer", description="Schedule Explorer: explore, teach and tune "
                    "tensor-program schedules.")
    from .. import __version__
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
    except BrokenPipeError:          # the reader left (explorer show --source | head)
        _quiet_stdout()
        return 0
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


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush into the closed
    pipe does not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _fail(line: str, status: int = 1) -> int:
    print(line, file=sys.stderr)
    return status
