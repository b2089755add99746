"""SQL92 filters (common/sql_filter): RocketMQ's semantics on examples, and the errors with their positions."""

import pytest

from pocketmq.common.errors import SubscriptionParseError
from pocketmq.common.sql_filter import SqlFilterError, compile_sql

ORDER = {"region": "eu", "amount": "150", "TAGS": "paid", "name": "order-7", "vip": "true", "ratio": "0.25"}


def matches(expression: str, properties: dict[str, str]) -> bool:
    return compile_sql(expression).matches(properties)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("region = 'eu' AND amount > 100", True),
        ("region = 'us' OR amount >= 150", True),
        ("region <> 'eu'", False),
        ("TAGS IN ('paid', 'refunded')", True),
        ("TAGS NOT IN ('paid', 'refunded')", False),
        ("amount BETWEEN 100 AND 200", True),
        ("amount NOT BETWEEN 100 AND 200", False),
        ("amount BETWEEN 150 AND 150", True),
        ("name LIKE 'order-_'", True),
        ("name LIKE 'ord%'", True),
        ("name LIKE 'ORD%'", False),  # LIKE is case-sensitive
        ("name NOT LIKE '%-7'", False),
        ("name LIKE 'order!-7' ESCAPE '!'", True),
        ("name LIKE 'order\\%' ESCAPE '\\'", False),
        ("name CONTAINS 'der'", True),
        ("name STARTSWITH 'order'", True),
        ("name ENDSWITH '7'", True),
        ("name NOT CONTAINS 'x'", True),
        ("missing IS NULL", True),
        ("region IS NOT NULL", True),
        ("vip = TRUE", True),
        ("vip = FALSE", False),
        ("ratio < 0.5", True),
        ("ratio < 1", False),  # '0.25' does not read as a long: a type mismatch, no match
        ("amount > 99.5", True),
        ("amount = 150", True),
        ("amount = 150.0", True),  # a long and a double compare as doubles
        ("amount = '150'", True),
        ("amount > ratio", True),  # two texts are ordered as doubles
        ("TRUE", True),
        ("FALSE OR TRUE", True),
        ("NOT (region = 'us')", True),
        ("not (region = 'us') or amount > 10", True),  # keywords in any case
        ("NOT region = 'us'", False),  # (NOT region) = 'us': NOT binds tighter than =, as in RocketMQ
        ("-amount < -100", False),  # a property is text: its negation is unknown
        ("amount > -1", True),
        ("(region = 'eu') AND ((amount > 100))", True),
        ("region = 'eu' -- the line comment\n AND /* a block */ amount > 100", True),
        ("region", False),  # a bare property is never true: values are text
        ("amount > 1e2", True),
        ("amount < 200L", True),
    ],
)
def test_rocketmq_semantics_on_one_message(expression, expected):
    assert matches(expression, ORDER) is expected


@pytest.mark.parametrize(
    "expression",
    [
        "missing = 'x'",
        "missing <> 'x'",
        "missing > 1",
        "missing IN ('x')",
        "missing NOT IN ('x')",
        "missing BETWEEN 1 AND 2",
        "missing NOT BETWEEN 1 AND 2",
        "missing LIKE '%'",
        "missing NOT LIKE 'x'",
        "NOT (missing = 'x')",
        "missing",
        "NOT missing",
        "missing = 'x' OR FALSE",
        "NULL",
    ],
)
def test_a_missing_property_makes_a_comparison_unknown_and_unknown_never_matches(expression):
    assert matches(expression, ORDER) is False


def test_unknown_is_neither_true_nor_false_in_and_or():
    assert matches("missing = 'x' OR region = 'eu'", ORDER)  # unknown OR true
    assert not matches("missing = 'x' AND region = 'eu'", ORDER)  # unknown AND true: unknown
    assert not matches("NOT (missing = 'x' AND region = 'eu')", ORDER)  # NOT unknown: unknown
    assert matches("NOT (missing = 'x' AND region = 'us')", ORDER)  # unknown AND false: false


def test_both_sides_missing_are_equal_and_a_missing_right_side_is_not_equal():
    assert matches("missing = other", ORDER)
    assert not matches("region = missing", ORDER)
    assert matches("region <> missing", ORDER)


def test_a_type_mismatch_fails_the_whole_evaluation_unless_never_reached():
    assert not matches("name > 5 OR region = 'eu'", ORDER)  # 'order-7' is no number
    assert matches("region = 'eu' OR name > 5", ORDER)  # OR has its answer before the mismatch
    assert not matches("name = 5", ORDER)
    assert not matches("TRUE = vip", ORDER)  # a boolean on the left of a text never converts
    assert not matches("ratio = 1", ORDER)


def test_numbers_read_as_java_reads_them():
    assert matches("n = 7", {"n": "+7"})
    assert not matches("n = 7", {"n": " 7"})  # Long.valueOf takes no whitespace
    assert matches("n = 7.0", {"n": " 7 "})  # Double.valueOf trims it
    assert matches("n = 7.0", {"n": "7d"})
    assert matches("n > 1e300", {"n": "Infinity"})
    assert not matches("n > 1", {"n": "9223372036854775808"})  # past the long range
    assert matches("n = -9223372036854775808", {"n": "-9223372036854775808"})
    assert matches("n > 1.0", {"n": "NaN"})  # NaN is above everything, as Double.compareTo says


@pytest.mark.parametrize(
    ("expression", "position", "reason"),
    [
        ("", 0, "empty"),
        ("a >", 3, "expected a value"),
        ("a = 'x", 4, "unterminated string"),
        ("a != 1", 2, "not equal is <>"),
        ('a = "x"', 4, "single quotes"),
        ("a IN (1)", 6, "quoted string"),
        ("a IN ('x'", 9, "')'"),
        ("1 IN ('x')", 0, "IN applies to a property"),
        ("a > 'x'", 4, "cannot be compared"),
        ("a > TRUE", 4, "cannot be compared"),
        ("(a = 1) > 2", 0, "a condition cannot be compared"),
        ("5", 0, "not a condition"),
        ("'x' AND a = 1", 0, "not a condition"),
        ("a = 1 AND 2", 10, "not a condition"),
        ("a = NULL", 4, "IS NULL"),
        ("TRUE = 'x'", 0, "cannot be compared"),
        ("b BETWEEN 5 AND 1", 10, "low bound"),
        ("b BETWEEN 1 OR 5", 12, "'AND'"),
        ("(a = 1", 6, "to close the '(' at position 0"),
        ("a = 1 b = 2", 6, "after a complete expression"),
        ("a IS 1", 5, "'NULL'"),
        ("a = 007", 4, "leading zero"),
        ("a = 9223372036854775808", 4, "64-bit"),
        ("a LIKE 'x' ESCAPE 'ab'", 18, "one character"),
        ("a = #", 4, "unexpected character"),
    ],
)
def test_a_bad_expression_names_the_position_of_its_fault(expression, position, reason):
    with pytest.raises(SqlFilterError) as caught:
        compile_sql(expression)
    assert caught.value.position == position
    assert reason in str(caught.value)
    assert f"position {position}" in str(caught.value)
    assert isinstance(caught.value, SubscriptionParseError)  # answered with SUBSCRIPTION_PARSE_FAILED


def test_the_error_marks_the_fault_in_the_text():
    with pytest.raises(SqlFilterError, match=r"a > \[HERE\]'x'"):
        compile_sql("a > 'x'")
