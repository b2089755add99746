"""How output looks where it goes: colour on a terminal and never in a pipe or a file, nor with ``NO_COLOR``
set (to anything) or ``TERM=dumb``; an error is one line, a JSON object with ``--json``; a long command's
progress bar only where a person watches it."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TextIO

_STYLES = {"bold": "1", "red": "31", "yellow": "33", "green": "32"}


def colour_on(stream: TextIO) -> bool:
    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    return _isatty(stream)


def paint(text: str, style: str, stream: TextIO) -> str:
    """``text`` in ``style`` (bold, red, yellow, green) when ``stream`` shows colour, else as it is."""
    return f"\x1b[{_STYLES[style]}m{text}\x1b[0m" if colour_on(stream) else text


def print_error(args, message: str) -> None:
    """``pocketmq COMMAND: error: MESSAGE`` on stderr; with ``--json`` ``{"command": ..., "error": ...}``."""
    if getattr(args, "json", False):
        print(json.dumps({"command": args.command, "error": message}, ensure_ascii=False), file=sys.stderr)
    else:
        print(f"pocketmq {args.command}: {paint('error:', 'red', sys.stderr)} {message}", file=sys.stderr)


def print_note(command: str, message: str) -> None:
    """A side remark a command makes on stderr (its stdout stays its output)."""
    print(f"pocketmq {command}: {paint('note:', 'yellow', sys.stderr)} {message}", file=sys.stderr)


class ProgressBar:
    """``what  [#####.....]  done/total`` on stderr, redrawn in place at most 10 times a second, while a long
    command works through ``total`` items (brokers, messages). Only where a person watches: stderr is a terminal
    (a log or a pipe gets no redraws), the command is not asked for JSON (``--json`` is for scripts, whose stderr
    carries JSON errors only), and, for a command that prints a line per item (``lines``), those lines go
    elsewhere than a terminal, where they show how far it is themselves. A bar of one item is not drawn.

    ``with ProgressBar(...) as bar:`` ends the bar's line when the work ends, however it ends; ``pause()``
    clears the bar before the command prints a line of its own (the next ``advance`` draws it again)."""

    REDRAW_S = 0.1
    WIDTH = 30

    def __init__(self, args, what: str, total: int = 0, *, lines: bool = False):
        self.what, self.total, self.done = what, total, 0
        self._shown_at = 0.0
        self._drawn = False
        json_output = getattr(args, "json", False)
        self.on = not json_output and _isatty(sys.stderr) and not (lines and _isatty(sys.stdout))

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def advance(self, count: int = 1) -> None:
        self.update(self.done + count)

    def update(self, done: int, total: int | None = None) -> None:
        """``done`` items of ``total`` (unchanged when None) are through."""
        self.done, self.total = done, self.total if total is None else total
        now = time.monotonic()
        finished = self.done >= self.total
        if self.on and self.total > 1 and (now - self._shown_at >= self.REDRAW_S or finished):
            self._shown_at = now
            filled = self.WIDTH * min(self.done, self.total) // self.total
            bar = "#" * filled + "." * (self.WIDTH - filled)
            sys.stderr.write(f"\r{self.what}  [{bar}]  {self.done}/{self.total}")
            sys.stderr.flush()
            self._drawn = True

    def pause(self) -> None:
        """Clears the bar from its line, for a line of the command's own."""
        if self._drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self._drawn = False
            self._shown_at = 0.0

    def close(self) -> None:
        """Ends the bar's line (the command's next words start on a line of their own)."""
        if self._drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self._drawn = False


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
