"""The ``explorer`` command line.

Each subcommand lives in its own module, which provides ``add_arguments(parser)``
and ``main(args) -> int``; add one by adding a line to ``SUBCOMMANDS``. A
subcommand signals a usage mistake (unknown case, bad shape...) by raising
``UsageError``: the command then prints the message after its usage line and
exits with status 2, as argparse does for its own errors. Other engine errors
exit with status 1 and their message; no traceback for either.
"""
from __future__ import annotations

import argparse
import importlib
import sys

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


def build_parser() -> tuple:
    """(the top parser, {subcommand name: its parser})."""
    parser = argparse.ArgumentParser(
        prog="explorer", description="Schedule Explorer: explore, teach and tune "
        "tensor-program schedules.")
    from . import __version__
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
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
        return 2
    try:
        return int(args._module.main(args) or 0)
    except UsageError as e:
        parsers[args.command].error(str(e))
    except ExplorerError as e:
        print(f"explorer {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"explorer {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # run through the imported module, so that subcommands raising explorer.cli.UsageError
    # are caught here too
    from explorer.cli import main as _main
    sys.exit(_main())
