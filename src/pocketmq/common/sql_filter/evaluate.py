"""An SQL92 filter tree turned into a predicate over a message's properties (three-valued, as RocketMQ's).

Each node becomes a closure giving True, False or None (unknown): a missing property is None, and so is
every comparison with it (``a = 1``, ``a > 1``, ``a IN (...)``, ``a LIKE ...``), except IS [NOT] NULL. NOT
of unknown is unknown; AND is false as soon as one side is false, OR true as soon as one side is true, else
unknown if a side is. A message matches when the whole expression is True; a type mismatch anywhere in the
evaluation (``values.TypeMismatch``) means no match. Evaluation goes left to right and stops as soon as AND
or OR has its answer, so a mismatch on a side never evaluated does not count (as in RocketMQ).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from pocketmq.common.sql_filter.syntax import (
    And,
    BoolCast,
    Compare,
    In,
    IsNull,
    Literal,
    Match,
    Negate,
    Node,
    Not,
    Or,
    Property,
)
from pocketmq.common.sql_filter.values import TypeMismatch, Value, compare, java_double

Properties = Mapping[str, str]
Evaluator = Callable[[Properties], Value]

_ORDER_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


def compile_tree(tree: Node) -> Callable[[Properties], bool]:
    """Whether a message with these properties matches the (condition) ``tree``."""
    evaluate = _compile(tree)

    def matches(properties: Properties) -> bool:
        try:
            return evaluate(properties) is True
        except TypeMismatch:
            return False

    return matches


def _compile(node: Node) -> Evaluator:
    if isinstance(node, Literal):
        value = node.value
        return lambda _p: value
    if isinstance(node, Property):
        name = node.name
        return lambda p: p.get(name)
    if isinstance(node, (And, Or)):
        return _connective(_compile(node.left), _compile(node.right), decisive=isinstance(node, Or))
    if isinstance(node, Not):
        return _not(_compile(node.operand))
    if isinstance(node, Compare):
        left, right = _compile(node.left), _compile(node.right)
        return _equal(left, right) if node.op == "=" else _ordered(left, right, _ORDER_TESTS[node.op])
    if isinstance(node, IsNull):
        return _is_null(_compile(node.operand), node.negated)
    if isinstance(node, In):
        return _in(node.operand.name, node.values, node.negated)
    if isinstance(node, Match):
        return _text_test(_compile(node.operand), _text_predicate(node), node.negated)
    if isinstance(node, BoolCast):
        name = node.operand.name
        return lambda p: None if p.get(name) is None else False  # property values are text, never booleans
    if isinstance(node, Negate):
        return _negate(_compile(node.operand))
    raise TypeError(f"not an SQL92 filter node: {node!r}")


def _connective(left: Evaluator, right: Evaluator, *, decisive: bool) -> Evaluator:
    """AND (``decisive`` False) or OR (True): a side with the decisive value settles it, left first."""

    def evaluate(p: Properties) -> Value:
        lv = left(p)
        if lv is decisive:
            return decisive
        rv = right(p)
        if rv is decisive:
            return decisive
        return None if lv is None or rv is None else not decisive

    return evaluate


def _not(operand: Evaluator) -> Evaluator:
    def evaluate(p: Properties) -> Value:
        value = operand(p)
        return None if value is None else not value

    return evaluate


def _equal(left: Evaluator, right: Evaluator) -> Evaluator:
    def evaluate(p: Properties) -> Value:
        lv, rv = left(p), right(p)
        if lv is None or rv is None:
            # both missing are equal; only a missing left side makes the comparison unknown
            return True if lv is rv else (None if lv is None else False)
        if type(lv) is type(rv):
            return lv == rv
        return compare(lv, rv) == 0

    return evaluate


def _ordered(left: Evaluator, right: Evaluator, test: Callable[[int], bool]) -> Evaluator:
    def evaluate(p: Properties) -> Value:
        lv = left(p)
        if lv is None:
            return None
        rv = right(p)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:  # two texts are ordered as numbers
            return test(compare(java_double(lv), java_double(rv)))
        return test(compare(lv, rv))

    return evaluate


def _is_null(operand: Evaluator, negated: bool) -> Evaluator:
    return lambda p: (operand(p) is None) is not negated


def _in(name: str, values: frozenset[str], negated: bool) -> Evaluator:
    def evaluate(p: Properties) -> Value:
        value = p.get(name)
        if value is None:
            return None
        return (value in values) is not negated

    return evaluate


def _text_test(operand: Evaluator, predicate: Callable[[str], bool], negated: bool) -> Evaluator:
    def evaluate(p: Properties) -> Value:
        value = operand(p)
        if value is None:
            return None
        if type(value) is not str:
            return False
        return predicate(value) is not negated

    return evaluate


def _text_predicate(node: Match) -> Callable[[str], bool]:
    pattern = node.pattern
    if node.kind == "CONTAINS":
        return lambda v: pattern in v
    if node.kind == "STARTSWITH":
        return lambda v: v.startswith(pattern)
    if node.kind == "ENDSWITH":
        return lambda v: v.endswith(pattern)
    regex = like_regex(pattern, node.escape)
    return lambda v: regex.fullmatch(v) is not None


def like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    """LIKE's pattern as a regex: ``%`` any run of characters, ``_`` exactly one; the escape character makes
    the next character literal."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if escape is not None and char == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _negate(operand: Evaluator) -> Evaluator:
    def evaluate(p: Properties) -> Value:
        value = operand(p)
        if type(value) in (int, float):
            return -value  # type: ignore[operator]
        return None  # RocketMQ negates numbers only

    return evaluate
