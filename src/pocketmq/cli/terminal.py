"""How output looks where it goes: colour on a terminal and never in a pipe or a file, nor with ``NO_COLOR``
set (to anything) or ``TERM=dumb``; an error is one line, a JSON object with ``--json``."""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

_STYLES = {"bold": "1", "red": "31", "yellow": "33", "green": "32"}


def colour_on(stream: TextIO) -> bool:
    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


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
