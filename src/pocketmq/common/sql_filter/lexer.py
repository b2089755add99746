"""Tokens of an SQL92 filter expression (RocketMQ's selector grammar), each with its position in the text.

Keywords are case-insensitive; a name that spells a keyword is the keyword, never a property. Property names
are case-sensitive: ``[A-Za-z_$][A-Za-z0-9_$]*``. Strings are single-quoted, a quote doubled inside one.
Numbers are longs (``0``, ``42``, ``42L``: no leading zeros) or doubles (``1.5``, ``.5``, ``5.``, ``1e3``).
``-- comment`` to the end of the line and ``/* comment */`` are skipped, as whitespace is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pocketmq.common.sql_filter.errors import SqlFilterError

KEYWORDS = frozenset(
    {
        "AND",
        "OR",
        "NOT",
        "BETWEEN",
        "IN",
        "IS",
        "NULL",
        "TRUE",
        "FALSE",
        "LIKE",
        "ESCAPE",
        "CONTAINS",
        "STARTSWITH",
        "ENDSWITH",
    }
)
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

# One alternative per token kind, tried in this order at each position: the longer operators first.
_TOKEN = re.compile(
    r"""
    (?P<space>\s+|--[^\n\r]*|/\*.*?\*/)
  | (?P<double>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<long>\d+[lL]?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<name>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|<=|>=|[=<>(),+-])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "long" | "double" | "string" | "name" | "keyword" | "op" | "end"
    text: str  # as written (keywords upper-cased)
    value: object  # the literal's value (int, float, str); None for the rest
    position: int  # 0-based offset in the expression


def tokenize(expression: str) -> list[Token]:
    """The tokens of ``expression``, ending with an ``end`` token; SqlFilterError at the first character
    that starts no token."""
    tokens: list[Token] = []
    pos, end = 0, len(expression)
    while pos < end:
        m = _TOKEN.match(expression, pos)
        if m is None:
            raise SqlFilterError(_unexpected(expression[pos]), expression, pos)
        kind, text = m.lastgroup or "", m.group()
        if kind == "space":
            pass
        elif kind == "long":
            tokens.append(_long(expression, text, pos))
        elif kind == "double":
            tokens.append(Token(kind, text, float(text), pos))
        elif kind == "string":
            tokens.append(Token(kind, text, text[1:-1].replace("''", "'"), pos))
        elif kind == "name" and text.upper() in KEYWORDS:
            tokens.append(Token("keyword", text.upper(), None, pos))
        else:
            tokens.append(Token(kind, text, None, pos))
        pos = m.end()
    tokens.append(Token("end", "", None, end))
    return tokens


def _long(expression: str, text: str, pos: int) -> Token:
    digits = text.rstrip("lL")
    if len(digits) > 1 and digits[0] == "0":
        raise SqlFilterError(f"number {text} has a leading zero", expression, pos)
    value = int(digits)
    # -9223372036854775808 is written as the negation of a long: its digits alone are one past the range
    if value > LONG_MAX + 1:
        raise SqlFilterError(f"number {text} is out of the 64-bit range", expression, pos)
    return Token("long", text, value, pos)


def _unexpected(char: str) -> str:
    if char == "'":
        return "unterminated string (a quote inside a string is written twice: 'it''s')"
    if char in '!"':
        hint = {"!": " (not equal is <>)", '"': " (strings take single quotes)"}[char]
        return f"unexpected character {char!r}{hint}"
    return f"unexpected character {char!r}"
