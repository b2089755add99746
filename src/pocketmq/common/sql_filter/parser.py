"""A recursive-descent parser of RocketMQ's SQL92 selector grammar, with the checks RocketMQ makes when it
compiles an expression (each error names the position of the fault).

Grammar, loosest binding first (every binary level is left-associative)::

    expression  := or
    or          := and ( OR and )*
    and         := equality ( AND equality )*
    equality    := comparison ( ( = | <> ) comparison | IS [NOT] NULL )*
    comparison  := unary ( ( > | >= | < | <= ) unary
                         | [NOT] BETWEEN unary AND unary
                         | [NOT] IN ( string ( , string )* )
                         | [NOT] LIKE string [ ESCAPE string ]
                         | [NOT] ( CONTAINS | STARTSWITH | ENDSWITH ) string )*
    unary       := + unary | - unary | NOT unary | primary
    primary     := literal | property | ( or )
    literal     := string | long | double | TRUE | FALSE | NULL

NOT binds tighter than a comparison, as in RocketMQ: ``NOT a = 1`` is ``(NOT a) = 1``; write ``NOT (a = 1)``.
"""

from __future__ import annotations

from typing import NoReturn

from pocketmq.common.sql_filter.errors import SqlFilterError
from pocketmq.common.sql_filter.lexer import LONG_MAX, Token, tokenize
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
    is_boolean,
)
from pocketmq.common.sql_filter.values import compare

_ORDERING = (">", ">=", "<", "<=")
_TEXT_TESTS = ("LIKE", "CONTAINS", "STARTSWITH", "ENDSWITH")


def parse(expression: str) -> Node:
    """The tree of ``expression``, a condition; SqlFilterError for a bad one."""
    return _Parser(expression).expression()


class _Parser:
    def __init__(self, expression: str):
        self._text = expression
        self._tokens = tokenize(expression)
        self._i = 0

    # -- tokens ---------------------------------------------------------------------------------------------------
    @property
    def _peek(self) -> Token:
        return self._tokens[self._i]

    def _at(self, text: str, ahead: int = 0) -> bool:
        token = self._tokens[min(self._i + ahead, len(self._tokens) - 1)]
        return token.kind in ("keyword", "op") and token.text == text

    def _take(self) -> Token:
        token = self._tokens[self._i]
        self._i += 1
        return token

    def _expect(self, text: str, what: str) -> Token:
        if not self._at(text):
            self._fail(f"expected {text!r} {what}, found {_shown(self._peek)}", self._peek.position)
        return self._take()

    def _fail(self, reason: str, position: int) -> NoReturn:
        raise SqlFilterError(reason, self._text, position)

    # -- grammar --------------------------------------------------------------------------------------------------
    def expression(self) -> Node:
        if self._peek.kind == "end":
            self._fail("the expression is empty", 0)
        start = self._peek.position
        node = self._or()
        if self._peek.kind != "end":
            self._fail(f"unexpected {_shown(self._peek)} after a complete expression", self._peek.position)
        return self._condition(node, start)

    def _or(self) -> Node:
        start = self._peek.position
        left = self._and()
        while self._at("OR"):
            self._take()
            right_start = self._peek.position
            right = self._and()
            left = Or(self._condition(left, start), self._condition(right, right_start))
        return left

    def _and(self) -> Node:
        start = self._peek.position
        left = self._equality()
        while self._at("AND"):
            self._take()
            right_start = self._peek.position
            right = self._equality()
            left = And(self._condition(left, start), self._condition(right, right_start))
        return left

    def _equality(self) -> Node:
        start = self._peek.position
        left = self._comparison()
        while True:
            if self._at("=") or self._at("<>"):
                op = self._take().text
                right_start = self._peek.position
                right = self._comparison()
                self._check_equal_operands(left, start, right, right_start)
                left = Compare("=", left, right) if op == "=" else Not(Compare("=", left, right))
            elif self._at("IS"):
                self._take()
                negated = self._at("NOT")
                if negated:
                    self._take()
                self._expect("NULL", "after IS" + (" NOT" if negated else ""))
                left = IsNull(left, negated)
            else:
                return left

    def _comparison(self) -> Node:
        start = self._peek.position
        left = self._unary()
        while True:
            token = self._peek
            if token.kind == "op" and token.text in _ORDERING:
                self._take()
                right_start = self._peek.position
                right = self._unary()
                self._check_ordered(left, start)
                self._check_ordered(right, right_start)
                left = Compare(token.text, left, right)
                continue
            negated = self._at("NOT") and any(self._at(k, 1) for k in ("BETWEEN", "IN", *_TEXT_TESTS))
            if negated:
                self._take()
            if self._at("BETWEEN"):
                left = self._between(left, start, negated)
            elif self._at("IN"):
                left = self._in(left, start, negated)
            elif any(self._at(k) for k in _TEXT_TESTS):
                left = self._text_test(left, negated)
            else:
                return left

    def _between(self, value: Node, start: int, negated: bool) -> Node:
        self._take()
        low_start = self._peek.position
        low = self._unary()
        self._expect("AND", "between the bounds of BETWEEN")
        high_start = self._peek.position
        high = self._unary()
        for node, position in ((value, start), (low, low_start), (high, high_start)):
            self._check_ordered(node, position)
        if negated:
            return Or(Compare("<", value, low), Compare(">", value, high))
        if isinstance(low, Literal) and isinstance(high, Literal) and compare(high.value, low.value) < 0:
            self._fail(f"BETWEEN {low.value} AND {high.value}: the low bound is above the high bound", low_start)
        return And(Compare(">=", value, low), Compare("<=", value, high))

    def _in(self, operand: Node, start: int, negated: bool) -> Node:
        self._take()
        if not isinstance(operand, Property):
            self._fail("IN applies to a property", start)
        self._expect("(", "after IN")
        values = [self._string("in the IN list")]
        while self._at(","):
            self._take()
            values.append(self._string("in the IN list"))
        self._expect(")", "after the IN list")
        return In(operand, frozenset(values), negated)

    def _text_test(self, operand: Node, negated: bool) -> Node:
        kind = self._take().text
        pattern = self._string(f"after {kind}")
        escape = None
        if kind == "LIKE" and self._at("ESCAPE"):
            self._take()
            token = self._peek
            escape = self._string("after ESCAPE")
            if len(escape) != 1:
                self._fail("the ESCAPE string must be one character", token.position)
        return Match(kind, operand, pattern, negated, escape)

    def _unary(self) -> Node:
        token = self._peek
        if self._at("+"):
            self._take()
            return self._unary()
        if self._at("-"):
            self._take()
            if self._peek.kind in ("long", "double"):  # a negative number (the only way to write the smallest long)
                return Literal(-self._take().value)  # type: ignore[operator]
            operand = self._unary()
            if isinstance(operand, Literal) and type(operand.value) in (int, float):
                return Literal(-operand.value)  # type: ignore[operator]
            return Negate(operand)
        if self._at("NOT"):
            self._take()
            start = self._peek.position
            return Not(self._condition(self._unary(), start))
        node = self._primary()
        if isinstance(node, Literal) and type(node.value) is int and node.value > LONG_MAX:
            self._fail(f"number {token.text} is out of the 64-bit range", token.position)
        return node

    def _primary(self) -> Node:
        token = self._take()
        if token.kind in ("long", "double", "string"):
            return Literal(token.value)  # type: ignore[arg-type]
        if token.kind == "name":
            return Property(token.text)
        if token.kind == "keyword" and token.text in ("TRUE", "FALSE", "NULL"):
            return Literal({"TRUE": True, "FALSE": False, "NULL": None}[token.text])
        if token.kind == "op" and token.text == "(":
            inner = self._or()
            self._expect(")", f"to close the '(' at position {token.position}")
            return inner
        self._fail(f"expected a value, a property or '(', found {_shown(token)}", token.position)

    def _string(self, where: str) -> str:
        token = self._peek
        if token.kind != "string":
            self._fail(f"expected a quoted string {where}, found {_shown(token)}", token.position)
        self._take()
        return token.value  # type: ignore[return-value]

    # -- RocketMQ's checks ----------------------------------------------------------------------------------------
    def _condition(self, node: Node, position: int) -> Node:
        if is_boolean(node):
            return node
        if isinstance(node, Property):
            return BoolCast(node)
        self._fail("this is a value, not a condition", position)

    def _check_ordered(self, node: Node, position: int) -> None:
        """Only numbers, properties and negations may be ordered (>, >=, <, <=, BETWEEN)."""
        if isinstance(node, Literal) and type(node.value) not in (int, float):
            self._fail(f"{_literal_text(node)} cannot be compared with >, >=, <, <= or BETWEEN", position)
        if is_boolean(node):
            self._fail("a condition cannot be compared with >, >=, <, <= or BETWEEN", position)

    def _check_equal_operands(self, left: Node, left_position: int, right: Node, right_position: int) -> None:
        for node, position in ((left, left_position), (right, right_position)):
            if isinstance(node, Literal) and node.value is None:
                self._fail("NULL cannot be compared with = or <>: write IS NULL or IS NOT NULL", position)
        if isinstance(left, Literal) and isinstance(right, Literal) and is_boolean(left) and not is_boolean(right):
            self._fail(f"{_literal_text(left)} cannot be compared with {_literal_text(right)}", left_position)


def _shown(token: Token) -> str:
    return "the end of the expression" if token.kind == "end" else repr(token.text)


def _literal_text(node: Literal) -> str:
    if node.value is None or type(node.value) is bool:
        return {None: "NULL", True: "TRUE", False: "FALSE"}[node.value]
    return repr(node.value)
