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
    command works through ``total`` items. Only when stderr is a terminal (a log or a pipe gets no redraws), and
    for a command that prints a line per item (``lines``) only when those go elsewhere than a terminal, where
    they show how far it is themselves."""

    REDRAW_S = 0.1
    WIDTH = 30

    def __init__(self, what: str, total: int, *, lines: bool):
        self.what, self.total, self.done = what, total, 0
        self._shown_at = 0.0
        self.on = total > 1 and _isatty(sys.stderr) and not (lines and _isatty(sys.stdout))

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if self.on and (now - self._shown_at >= self.REDRAW_S or self.done >= self.total):
            self._shown_at = now
            filled = self.WIDTH * self.done // self.total
            bar = "#" * filled + "." * (self.WIDTH - filled)
            sys.stderr.write(f"\r{self.what}  [{bar}]  {self.done}/{self.total}")
            sys.stderr.flush()

    def close(self) -> None:
        """Ends the bar's line (the command's next words start on a line of their own)."""
        if self.on and self.done:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
