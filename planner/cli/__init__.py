"""The `planner` command line: one module per subcommand (count, predict and compare, calibrate,
validate and op, serve, plan, tco, advise, trace, sweep), each a thin function over the library.

Human units appear only here. Errors raised on purpose (PlannerError) and argparse's own errors
print one line and exit 2 (the usage is one `--help` away).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence

from planner.cli import progress
from planner.cli.advise import add_advise
from planner.cli.calibrate import add_calibrate, add_op, add_validate
from planner.cli.count import add_count
from planner.cli.models import add_models
from planner.cli.plan import add_plan
from planner.cli.predict import add_compare, add_predict
from planner.cli.serve import add_serve
from planner.cli.sweep import add_sweep
from planner.cli.tco import add_tco
from planner.cli.trace import add_trace
from planner.errors import PlannerError, shorten


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line: `planner count: error: argument --batch: ... (see
    planner count --help)`, exit status 2. The argument quoted is cut to a readable length."""

    def error(self, message: str):
        message = " ".join(message.split())  # a value holding newlines still gives one line
        self.exit(2, f"{self.prog}: error: {shorten(message, 400)} (see '{self.prog} --help')\n")


def parser() -> argparse.ArgumentParser:
    """The argument parser of the `planner` command."""
    p = OneLineParser(prog="planner", description="Performance model and capacity planner for AI workloads.")
    sub = p.add_subparsers(dest="command", required=True)
    add_count(sub)
    add_models(sub)
    add_predict(sub)
    add_compare(sub)
    add_calibrate(sub)
    add_validate(sub)
    add_op(sub)
    add_serve(sub)
    add_plan(sub)
    add_tco(sub)
    add_advise(sub)
    add_trace(sub)
    add_sweep(sub)
    return p


def main(argv: Sequence[str] | None = None, freeze: bool = False) -> int:
    """Run one subcommand; return the exit status: 0 ok, 2 bad input (one line on stderr), 3 an internal
    error (one line asking to report it; PLANNER_DEBUG=1 shows the traceback), 130 Ctrl-C. `freeze`: see
    entry()."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed its one line (or --help): return its status, as for any error
        return exc.code if isinstance(exc.code, int) else 0
    _freezing["on"] = freeze
    if freeze:
        gc.freeze()
    try:
        with progress.shown():  # a command's progress line (a terminal's only) is gone before it ends
            return args.func(args)
    except PlannerError as exc:
        print(f"planner: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("planner: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except (Exception, SystemExit) as exc:
        # the one place an unexpected exception becomes a message: never a traceback unless asked
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            return 0
        if os.environ.get("PLANNER_DEBUG") == "1":
            raise
        print(f"planner: internal error: {type(exc).__name__}: {_one_line(exc)}. This is a bug in planner: please "
              "report it with the command line (PLANNER_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 3
    finally:
        _freezing["on"] = False


def entry() -> None:
    """The `planner` command (and `python -m planner.cli`): main() on the process's arguments, its status as
    the exit status. Once the subcommand is parsed, the objects every import made (torch's functions and
    modules, some 470,000 the garbage collector would otherwise rescan at each full collection, 0.2 s
    apiece) are frozen out of its scans: `planner compare llama-2-7b --batch 64` runs 0.5 s sooner. Not
    done in main() itself, which tests call in one long process whose later garbage must stay collectable.
    A command imports torch when it runs, not when the parser is built: it calls imported() once it has."""
    sys.exit(main(freeze=True))


_freezing = {"on": False}
"""Whether this process's command runs under entry(), which freezes its imports out of the collector."""


def imported() -> None:
    """A command has imported what it runs (torch's modules and functions among them): under entry(), they
    too are frozen out of the collector's scans, as entry() says. Does nothing in main() as tests call it."""
    if _freezing["on"]:
        gc.freeze()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 2000 else text[:1997] + "..."
