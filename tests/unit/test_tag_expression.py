"""The one tag expression parser (common/tag_expression.py), as RocketMQ's FilterAPI reads a subscription."""

import pytest

from pocketmq.common.tag_expression import parse_tag_expression


@pytest.mark.parametrize("expression", [None, "", "*", " * ", "   ", "||", " || ", "|| ||"])
def test_an_expression_naming_no_tag_subscribes_to_every_tag(expression):
    assert parse_tag_expression(expression) is None


@pytest.mark.parametrize(
    ("expression", "tags"),
    [
        ("a", {"a"}),
        (" a ", {"a"}),
        ("a||b", {"a", "b"}),
        ("a || b", {"a", "b"}),
        ("  a  ||  b  ", {"a", "b"}),
        ("a || b || a", {"a", "b"}),
        ("a || || b", {"a", "b"}),
        ("|| a ||", {"a"}),
        ("tag with space || b", {"tag with space", "b"}),
        ("a | b", {"a | b"}),  # a single bar does not separate
    ],
)
def test_a_list_is_split_on_double_bars_trimmed_and_empty_parts_skipped(expression, tags):
    assert parse_tag_expression(expression) == frozenset(tags)


@pytest.mark.parametrize(
    ("expression", "tags"),
    [("a || *", {"a", "*"}), ("* || a", {"*", "a"}), ("*||", {"*"}), ("* || *", {"*"})],
)
def test_a_star_inside_a_list_is_a_tag_not_a_wildcard(expression, tags):
    # RocketMQ compares only the whole expression with "*"; in a list "*" lands in the tag set like any tag
    assert parse_tag_expression(expression) == frozenset(tags)
