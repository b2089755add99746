"""SQL92 property filters (RocketMQ's ``MessageSelector.bySql``): parse an expression once, test messages'
properties with it many times. Pure: the broker, the SDK and the tests share it. docs/filter.md has the
semantics for users.

``compile_sql(expression)`` gives a ``SqlFilter``; ``SqlFilterError`` (a ``SubscriptionParseError``) names
the position of a fault.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pocketmq.common.sql_filter.errors import SqlFilterError
from pocketmq.common.sql_filter.evaluate import compile_tree
from pocketmq.common.sql_filter.parser import parse
from pocketmq.common.sql_filter.syntax import Node, property_names

__all__ = ["SqlFilter", "SqlFilterError", "compile_sql"]


@dataclass(frozen=True)
class SqlFilter:
    expression: str
    tree: Node = field(repr=False)
    matches: Callable[[Mapping[str, str]], bool] = field(repr=False, compare=False)
    property_names: frozenset[str] = field(repr=False)  # what ``matches`` reads of the properties it is given


def compile_sql(expression: str) -> SqlFilter:
    """``expression`` parsed and compiled; SqlFilterError when it is not a valid condition."""
    tree = parse(expression)
    return SqlFilter(expression, tree, compile_tree(tree), property_names(tree))
