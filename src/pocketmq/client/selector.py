"""Which messages of a topic a consumer wants: a tag expression or an SQL92 property filter (RocketMQ's
``MessageSelector``). The broker filters; an SQL92 expression is compiled here first, so a bad one fails at
subscribe time with the position of its fault (``SqlFilterError``), not later on every pull.

Every consumer takes a ``MessageSelector`` or, as before, a plain tag expression string.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.common.sql_filter import compile_sql
from pocketmq.common.tag_expression import SUBSCRIBE_ALL, parse_tag_expression

TAG = "TAG"
SQL92 = "SQL92"


@dataclass(frozen=True, slots=True)
class MessageSelector:
    expression: str
    expression_type: str = TAG  # TAG | SQL92, as the wire names them

    @staticmethod
    def by_tag(expression: str = SUBSCRIBE_ALL) -> MessageSelector:
        """The messages with one of the tags of ``a || b`` (``*``: every message)."""
        return MessageSelector(expression.strip() or SUBSCRIBE_ALL, TAG)

    @staticmethod
    def by_sql(expression: str) -> MessageSelector:
        """The messages whose properties match the SQL92 ``expression`` (docs/filter.md); SqlFilterError
        when it is not a valid condition."""
        compile_sql(expression)
        return MessageSelector(expression, SQL92)

    @property
    def tags(self) -> frozenset[str] | None:
        """The tags a TAG selector names, which the client checks again (the broker compares hash codes); None
        when every message the broker sends is wanted."""
        return parse_tag_expression(self.expression) if self.expression_type == TAG else None

    def subscription_json(self, topic: str) -> dict:
        """RocketMQ's SubscriptionData of ``topic`` by this selector (heartbeats, CHECK_CLIENT_CONFIG)."""
        return {
            "classFilterMode": False,
            "topic": topic,
            "subString": self.expression,
            "tagsSet": sorted(self.tags or ()),
            "codeSet": [],
            "subVersion": 0,
            "expressionType": self.expression_type,
        }


def as_selector(selection: str | MessageSelector) -> MessageSelector:
    """A selector given as a string is a tag expression."""
    return selection if isinstance(selection, MessageSelector) else MessageSelector.by_tag(selection)
