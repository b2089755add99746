"""Property tests of SQL92 filters: random expressions, written out as text, parse back to the tree they came
from, and the compiled predicate agrees with a plain tree-walking reference evaluator on random messages.

The reference follows docs/filter.md's table directly (three-valued logic, conversions written out without
regexes), so a divergence points at one of the two readings of RocketMQ's semantics.
"""

import math

from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.sql_filter import compile_sql
from pocketmq.common.sql_filter.parser import parse
from pocketmq.common.sql_filter.syntax import And, BoolCast, Compare, In, IsNull, Literal, Match, Not, Or, Property

NAMES = ["a", "b", "c", "TAGS"]
TEXTS = ["1", "-2", "+3", "3.5", "1e3", " 7 ", "7d", "abc", "", "true", "TRUE", "NaN", "Infinity", "007", "x%y"]
TEXTS += ["9223372036854775808", "0.0", "-0.0", "a_b", "it's"]

# -- the reference ------------------------------------------------------------------------------------------------


class Mismatch(Exception):
    pass


def ref_long(text):
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not (digits.isascii() and digits.isdigit()):
        raise Mismatch
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise Mismatch
    return value


def ref_double(text):
    t = text.strip("".join(chr(c) for c in range(33)))
    sign, body = (t[0], t[1:]) if t[:1] in ("+", "-") else ("", t)
    if body in ("NaN", "Infinity"):
        return float(sign + ("nan" if body == "NaN" else "inf"))
    if body[-1:] in ("f", "F", "d", "D"):
        body = body[:-1]
    if not body or body[0] in "eE" or any(ch not in "0123456789.eE+-" for ch in body):
        raise Mismatch
    if body[:1] in "+-" or "+." in body or "-." in body:
        raise Mismatch
    try:
        return float(sign + body)
    except ValueError:
        raise Mismatch from None


def double_key(x):
    return (math.isnan(x), 0.0 if math.isnan(x) else x, math.copysign(1, x))


def ref_compare(lv, rv):
    if type(lv) is not type(rv):
        if type(lv) is str:
            lv = {int: ref_long, float: ref_double, bool: lambda s: s.lower() == "true"}[type(rv)](lv)
        elif type(rv) is str:
            if type(lv) is bool:
                raise Mismatch
            rv = {int: ref_long, float: ref_double}[type(lv)](rv)
        elif bool in (type(lv), type(rv)):
            return -1
        else:
            lv, rv = float(lv), float(rv)
    if type(lv) is float:
        lk, rk = double_key(lv), double_key(rv)
        return (lk > rk) - (lk < rk)
    return (lv > rv) - (lv < rv)


def ref_like(value, pattern):
    if not pattern:
        return value == ""
    head, rest = pattern[0], pattern[1:]
    if head == "%":
        return any(ref_like(value[i:], rest) for i in range(len(value) + 1))
    return bool(value) and (head == "_" or head == value[0]) and ref_like(value[1:], rest)


def ref(node, props):
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Property):
        return props.get(node.name)
    if isinstance(node, BoolCast):
        return None if props.get(node.operand.name) is None else False
    if isinstance(node, Not):
        v = ref(node.operand, props)
        return None if v is None else not v
    if isinstance(node, (And, Or)):
        stop = isinstance(node, Or)  # the value that decides at once
        lv = ref(node.left, props)
        if lv is stop:
            return stop
        rv = ref(node.right, props)
        if rv is stop:
            return stop
        return None if None in (lv, rv) else not stop
    if isinstance(node, IsNull):
        return (ref(node.operand, props) is None) != node.negated
    if isinstance(node, In):
        v = props.get(node.operand.name)
        return None if v is None else (v in node.values) != node.negated
    if isinstance(node, Match):
        v = ref(node.operand, props)
        return None if v is None else ref_like(v, node.pattern) != node.negated
    assert isinstance(node, Compare)
    lv, rv = ref(node.left, props), ref(node.right, props)
    if node.op == "=":
        if lv is None or rv is None:
            return True if lv is None and rv is None else (None if lv is None else False)
        return ref_compare(lv, rv) == 0
    if lv is None or rv is None:
        return None
    if type(lv) is str and type(rv) is str:
        lv, rv = ref_double(lv), ref_double(rv)
    c = ref_compare(lv, rv)
    return {">": c > 0, ">=": c >= 0, "<": c < 0, "<=": c <= 0}[node.op]


def ref_matches(tree, props):
    try:
        return ref(tree, props) is True
    except Mismatch:
        return False


# -- random trees, and their text ---------------------------------------------------------------------------------

properties = st.sampled_from(NAMES).map(Property)
numbers = st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False, width=64)).map(
    Literal
)
strings = st.sampled_from(TEXTS).map(Literal)
patterns = st.text(alphabet="ab1%_'", max_size=5)


def comparisons():
    ordered = st.one_of(properties, numbers)
    ordering = st.builds(Compare, st.sampled_from([">", ">=", "<", "<="]), ordered, ordered)
    equal_side = st.one_of(properties, numbers, strings)
    equality = st.builds(Compare, st.just("="), equal_side, st.one_of(equal_side, st.booleans().map(Literal)))
    return st.one_of(
        ordering,
        equality,
        st.builds(IsNull, properties, st.booleans()),
        st.builds(In, properties, st.frozensets(st.sampled_from(TEXTS), min_size=1, max_size=3), st.booleans()),
        st.builds(lambda p, pat, n: Match("LIKE", p, pat, n), properties, patterns, st.booleans()),
        properties.map(BoolCast),
        st.sampled_from([True, False]).map(Literal),
    )


conditions = st.recursive(
    comparisons(),
    lambda inner: st.one_of(
        st.builds(And, inner, inner), st.builds(Or, inner, inner), inner.map(Not), inner.map(lambda c: Not(c))
    ),
    max_leaves=8,
)


def text(node):
    if isinstance(node, Literal):
        if node.value is None or type(node.value) is bool:
            return {None: "NULL", True: "TRUE", False: "FALSE"}[node.value]
        if type(node.value) is str:
            return "'" + node.value.replace("'", "''") + "'"
        return repr(node.value)
    if isinstance(node, Property):
        return node.name
    if isinstance(node, BoolCast):
        return node.operand.name
    if isinstance(node, Not):
        return f"(NOT {text(node.operand)})"
    if isinstance(node, (And, Or)):
        return f"({text(node.left)} {'AND' if isinstance(node, And) else 'OR'} {text(node.right)})"
    if isinstance(node, IsNull):
        return f"({text(node.operand)} IS {'NOT ' if node.negated else ''}NULL)"
    if isinstance(node, In):
        values = ", ".join(text(Literal(v)) for v in sorted(node.values))
        return f"({node.operand.name} {'NOT ' if node.negated else ''}IN ({values}))"
    if isinstance(node, Match):
        return f"({text(node.operand)} {'NOT ' if node.negated else ''}LIKE {text(Literal(node.pattern))})"
    assert isinstance(node, Compare)
    return f"({text(node.left)} {node.op} {text(node.right)})"


messages = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(TEXTS), max_size=4)


@given(conditions)
def test_the_text_of_a_tree_parses_back_to_it(tree):
    assert parse(text(tree)) == tree


@given(conditions, st.lists(messages, min_size=1, max_size=8))
def test_the_compiled_filter_agrees_with_the_reference(tree, batch):
    compiled = compile_sql(text(tree))
    for props in batch:
        assert compiled.matches(props) == ref_matches(tree, props), (text(tree), props)


@given(st.sampled_from(NAMES), numbers, numbers, messages)
def test_between_is_two_comparisons(name, low, high, props):
    if low.value > high.value:
        low, high = high, low
    lo, hi = text(low), text(high)
    between = compile_sql(f"{name} BETWEEN {lo} AND {hi}").matches(props)
    assert between == compile_sql(f"{name} >= {lo} AND {name} <= {hi}").matches(props)
    outside = compile_sql(f"{name} NOT BETWEEN {lo} AND {hi}").matches(props)
    assert outside == compile_sql(f"{name} < {lo} OR {name} > {hi}").matches(props)
