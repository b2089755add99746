"""MessageSelector (client/selector.py): a tag expression or an SQL92 filter, checked at subscribe time."""

from __future__ import annotations

import pytest

from pocketmq.client import MessageSelector
from pocketmq.client.instance import ConsumerData
from pocketmq.client.selector import as_selector
from pocketmq.common.sql_filter import SqlFilterError


def test_a_string_is_a_tag_expression():
    assert as_selector(" a || b ") == MessageSelector("a || b", "TAG")
    assert as_selector("") == MessageSelector("*", "TAG")
    assert as_selector("a || b").tags == frozenset({"a", "b"})


def test_an_sql_selector_is_compiled_at_once_and_names_no_tags():
    selector = MessageSelector.by_sql("region = 'eu'")
    assert selector.expression_type == "SQL92" and selector.tags is None
    with pytest.raises(SqlFilterError, match="position 9"):
        MessageSelector.by_sql("region = ")


def test_the_heartbeat_carries_each_subscriptions_expression_type():
    data = ConsumerData("g", subscriptions={"t1": "a || b", "t2": MessageSelector.by_sql("n > 1")})
    subs = {s["topic"]: s for s in data.to_json(False)["subscriptionDataSet"]}
    assert (subs["t1"]["expressionType"], subs["t1"]["tagsSet"]) == ("TAG", ["a", "b"])
    assert (subs["t2"]["expressionType"], subs["t2"]["subString"], subs["t2"]["tagsSet"]) == ("SQL92", "n > 1", [])
