"""The error of an SQL92 expression that cannot be compiled, with where in the text it went wrong."""

from __future__ import annotations

from pocketmq.common.errors import SubscriptionParseError


class SqlFilterError(SubscriptionParseError):
    """A bad SQL92 filter expression. ``position`` is the 0-based character offset of the fault in
    ``expression``; the message names it, so a client sees it in the reply's remark."""

    def __init__(self, reason: str, expression: str, position: int):
        super().__init__(f"SQL92 filter: {reason} at position {position}: {_pointed(expression, position)}")
        self.reason = reason
        self.expression = expression
        self.position = position


def _pointed(expression: str, position: int) -> str:
    """The expression with a marker at the fault (one line, so it fits a log line and a remark); brackets are
    no part of the grammar, so the marker cannot be mistaken for the text."""
    return f"{expression[:position]}[HERE]{expression[position:]}".replace("\n", " ")
