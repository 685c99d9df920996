"""Progress on stderr for the commands that take seconds (count, predict, compare, serve, plan, advise, and
models when it has to build one): one line naming the step under way, the steps done of those the command
has, and the time since the line appeared, redrawn twice a second while a step runs.

Drawn only when stderr is a terminal: output captured by a pipe, a file or a test never holds it, and a
command that never calls step() never imports tqdm. main() (planner/cli/__init__.py) runs each command
inside shown(), which erases the line however the command ends, before any error is printed; a command
calls done() before it prints its result. The state is this module's, one command per process: the
library never draws progress of its own.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

REDRAW_S = 0.5
"""Seconds between redraws while a step runs (the elapsed time moves on)."""

_bar = None
_stop: threading.Event | None = None


def on_terminal() -> bool:
    """True when stderr is an interactive terminal (the only place progress is drawn)."""
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def step(text: str, of: int | None = None) -> None:
    """Step `text` begins, and the one before it is done. The first call of a command gives `of`, how
    many steps it takes (None: not known; the count is then left out); a later `of` changes it (a step
    that turns out to be needed). Does nothing off a terminal."""
    global _bar, _stop
    if _bar is None:
        if not on_terminal():
            return
        from tqdm import tqdm

        count = "{n_fmt}/{total_fmt}" if of else "{n_fmt}"
        _bar = tqdm(total=of, file=sys.stderr, leave=False, dynamic_ncols=True, desc=text,
                    bar_format="planner: " + count + " steps done [{elapsed}] {desc}")
        _stop = threading.Event()
        threading.Thread(target=_redraw, args=(_bar, _stop), name="planner-progress", daemon=True).start()
        return
    if of is not None and _bar.total is not None:
        _bar.total = of
    _bar.set_description_str(text, refresh=False)
    _bar.update(1)
    _bar.refresh()


def _redraw(bar, stop: threading.Event) -> None:
    while not stop.wait(REDRAW_S):
        try:
            bar.refresh()
        except (ValueError, OSError, AttributeError):  # closed between the wait and the refresh
            return


def done() -> None:
    """Erase the line (the command is about to print, or has ended); drawing stops."""
    global _bar, _stop
    if _stop is not None:
        _stop.set()
    if _bar is not None:
        _bar.close()
    _bar, _stop = None, None


@contextmanager
def shown() -> Iterator[None]:
    """Run a command: whatever progress it draws is erased when it ends, normally or not."""
    try:
        yield
    finally:
        done()
