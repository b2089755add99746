"""The parsed form of an SQL92 filter expression: a tree of these nodes (``parser.parse`` builds it,
``evaluate.compile_tree`` turns it into a predicate).

BETWEEN and ``<>`` have no node: as in RocketMQ, ``x BETWEEN a AND b`` is ``x >= a AND x <= b``, ``x NOT
BETWEEN a AND b`` is ``x < a OR x > b`` and ``x <> y`` is ``NOT (x = y)``, which gives them their NULL
semantics.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Literal:
    value: int | float | str | bool | None  # an int is a Java long, a float a double; None is NULL


@dataclass(frozen=True, slots=True)
class Property:
    name: str  # a message property; TAGS is the message's tag


@dataclass(frozen=True, slots=True)
class Negate:
    operand: Node  # unknown unless the operand is a number


@dataclass(frozen=True, slots=True)
class BoolCast:
    operand: Property  # a property used as a condition: unknown when missing, false otherwise (values are text)


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Compare:
    op: str  # = < <= > >=
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Node
    negated: bool  # IS NOT NULL


@dataclass(frozen=True, slots=True)
class In:
    operand: Property
    values: frozenset[str]
    negated: bool


@dataclass(frozen=True, slots=True)
class Match:
    """``LIKE`` (``%``, ``_``, optional ESCAPE), ``CONTAINS``, ``STARTSWITH``, ``ENDSWITH``: a text test."""

    kind: str  # LIKE | CONTAINS | STARTSWITH | ENDSWITH
    operand: Node
    pattern: str
    negated: bool
    escape: str | None = None  # LIKE only


Node = Literal | Property | Negate | BoolCast | Not | And | Or | Compare | IsNull | In | Match

# The nodes that give a truth value: what AND, OR, NOT and a whole expression need (a property is cast).
BOOLEAN_NODES = (BoolCast, Not, And, Or, Compare, IsNull, In, Match)


def property_names(node: Node) -> frozenset[str]:
    """The properties ``node`` reads: all a filter needs of a message."""
    if isinstance(node, Property):
        return frozenset((node.name,))
    if isinstance(node, (BoolCast, In, Negate, Not, IsNull, Match)):
        return property_names(node.operand)
    if isinstance(node, (And, Or, Compare)):
        return property_names(node.left) | property_names(node.right)
    return frozenset()


def is_boolean(node: Node) -> bool:
    """Whether ``node`` gives a truth value; TRUE, FALSE and NULL are boolean constants, as in RocketMQ."""
    return isinstance(node, BOOLEAN_NODES) or (
        isinstance(node, Literal) and (node.value is None or type(node.value) is bool)
    )
