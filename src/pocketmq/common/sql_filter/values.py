"""How an SQL92 filter compares values, as RocketMQ's broker does (its expressions are compiled with string
conversion on).

Property values are text; literals are longs, doubles, strings and booleans. Two values of different types
are brought to one before comparing: text next to a long is read as a Java long, next to a double as a Java
double, next to a boolean as ``true`` (any case) or false; a long next to a double becomes a double. Text
that does not read as the number it is compared with is a type mismatch (``TypeMismatch``): RocketMQ's
evaluation fails and the message does not match, whatever the rest of the expression says. Values that
cannot be brought together (a number next to a boolean) compare as "less than". Ordering two texts (``a >
b`` on two properties) reads both as doubles.
"""

from __future__ import annotations

import math
import re

from pocketmq.common.sql_filter.lexer import LONG_MAX, LONG_MIN

Value = int | float | str | bool | None


class TypeMismatch(Exception):
    """A value that cannot be converted for a comparison: the message does not match."""


_JAVA_LONG = re.compile(r"[+-]?[0-9]+")
# What Java's Double.valueOf reads, less hexadecimal floats: surrounding whitespace and control characters,
# a sign, NaN, Infinity, and an optional f/F/d/D suffix.
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_JAVA_BLANK = "".join(chr(c) for c in range(33))  # String.trim(): every char <= ' '


def java_long(text: str) -> int:
    if len(text) < 19 and text.isascii() and text.isdigit():  # the common case, without the regex
        return int(text)
    if _JAVA_LONG.fullmatch(text) is None:
        raise TypeMismatch(f"{text!r} is not a long")
    value = int(text)
    if not LONG_MIN <= value <= LONG_MAX:
        raise TypeMismatch(f"{text!r} is out of the long range")
    return value


def java_double(text: str) -> float:
    trimmed = text.strip(_JAVA_BLANK)
    if _JAVA_DOUBLE.fullmatch(trimmed) is None:
        raise TypeMismatch(f"{text!r} is not a double")
    return float(trimmed.rstrip("fFdD").replace("Infinity", "inf"))


def java_boolean(text: str) -> bool:
    return text.lower() == "true"


def compare(left: Value, right: Value) -> int:
    """Negative, zero or positive as ``left`` is below, equal to or above ``right``, after conversion (see the
    module's text); TypeMismatch when a text does not convert. Neither value is None."""
    lt, rt = type(left), type(right)
    if lt is not rt:
        if lt is str:
            if rt is int:
                left = java_long(left)  # type: ignore[arg-type]
            elif rt is float:
                left = java_double(left)  # type: ignore[arg-type]
            else:  # a boolean
                left = java_boolean(left)  # type: ignore[arg-type]
        elif rt is str:
            if lt is int:
                right = java_long(right)  # type: ignore[arg-type]
            elif lt is float:
                right = java_double(right)  # type: ignore[arg-type]
            else:  # RocketMQ reads a boolean next to text with a cast that fails: no match
                raise TypeMismatch("a boolean on the left of a text")
        elif lt is bool or rt is bool:
            return -1
        else:  # a long and a double: both doubles
            left, right = float(left), float(right)  # type: ignore[arg-type]
    if type(left) is float:
        return _compare_doubles(left, right)  # type: ignore[arg-type]
    return (left > right) - (left < right)  # type: ignore[operator]


def _compare_doubles(left: float, right: float) -> int:
    """Java's Double.compareTo: NaN equals itself and is above everything, -0.0 is below 0.0."""
    left_nan, right_nan = math.isnan(left), math.isnan(right)
    if left_nan or right_nan:
        return left_nan - right_nan
    if left == right:
        return (math.copysign(1, left) > math.copysign(1, right)) - (math.copysign(1, left) < math.copysign(1, right))
    return -1 if left < right else 1
