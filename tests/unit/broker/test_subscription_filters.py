"""Subscription filters (broker/subscription_filters.py): TAG and SQL92 expressions turned into the store's two
filters, compiled once per expression, SQL92 refused while enable_property_filter is off; and the property
lookup in place (common/record.py) they test records with."""

from __future__ import annotations

import pytest

from pocketmq.broker.subscription_filters import EVERY_MESSAGE, SubscriptionFilters
from pocketmq.common.errors import SubscriptionParseError
from pocketmq.common.message import MessageExt
from pocketmq.common.properties import decode_properties
from pocketmq.common.record import encode_record, property_keys, record_property_values
from pocketmq.common.sql_filter import SqlFilterError
from pocketmq.store.tags import tag_hash_code


def record(properties: dict[str, str], topic: str = "orders") -> bytes:
    return encode_record(MessageExt(topic=topic, body=b"body", properties=properties, born_host=("127.0.0.1", 1)))


def test_a_tag_expression_filters_by_tags_code_and_every_tag_filters_nothing():
    filters = SubscriptionFilters()
    assert filters.read_filter("TAG", "*") is EVERY_MESSAGE
    assert filters.read_filter(None, None) is EVERY_MESSAGE  # RocketMQ reads no type as TAG
    keep = filters.read_filter("tag", "a || b")
    assert keep.record is None and keep.tags_code is not None
    assert keep.tags_code(tag_hash_code("a")) and not keep.tags_code(tag_hash_code("c"))


@pytest.mark.parametrize("kind", ["SQL92", "sql92", "SQL"])  # SQL: the gRPC FilterType's name
def test_an_sql_expression_filters_records_by_their_properties(kind):
    keep = SubscriptionFilters().read_filter(kind, "region = 'eu' AND amount > 100")
    assert keep.tags_code is None
    assert keep.record(record({"region": "eu", "amount": "150"}))
    assert not keep.record(record({"region": "eu", "amount": "50"}))
    assert not keep.record(record({"region": "eu"}))


def test_a_compiled_filter_is_shared_by_the_reads_of_one_expression():
    filters = SubscriptionFilters()
    first = filters.read_filter("SQL92", "a = 1")
    assert filters.read_filter("SQL92", "a = 1") is first
    assert filters.read_filter("SQL92", "a = 2") is not first


@pytest.mark.parametrize(
    ("kind", "expression", "problem"),
    [("SQL92", "a >", "position 3"), ("SQL92", " ", "needs an expression"), ("XPATH", "a", "TAG, SQL92")],
)
def test_a_bad_subscription_is_a_parse_error(kind, expression, problem):
    with pytest.raises(SubscriptionParseError, match=problem):
        SubscriptionFilters().read_filter(kind, expression)


def test_sql_is_refused_while_property_filters_are_off_and_taken_once_they_are_on():
    enabled = [False]
    filters = SubscriptionFilters(lambda: enabled[0])
    with pytest.raises(SubscriptionParseError, match="enable_property_filter"):
        filters.read_filter("SQL92", "a = 1")
    assert filters.read_filter("TAG", "a") is not None  # tags are unaffected
    enabled[0] = True
    assert filters.read_filter("SQL92", "a = 1").record is not None


def test_a_bad_sql_expression_is_an_sql_filter_error_with_its_position():
    with pytest.raises(SqlFilterError) as caught:
        SubscriptionFilters().read_filter("SQL92", "a = = 1")
    assert caught.value.position == 4


@pytest.mark.parametrize(
    "properties",
    [
        {"region": "eu", "amount": "5"},
        {"xregion": "no", "region": "eu"},  # a name that ends with another's is another property
        {"a": "region\x01"},  # malformed values are no entries
        {"region": "", "amount": "ü€𝄞"},
        {"KEYS": "k1 k2", "TAGS": "t"},
        {},
    ],
)
def test_property_values_are_found_in_place_as_the_decoder_reads_them(properties):
    raw = record(properties, topic="t" * 100)
    keys = property_keys(["region", "amount", "TAGS", "missing"])
    decoded = decode_properties("".join(f"{k}\x01{v}\x02" for k, v in properties.items()))
    wanted = {k: v for k, v in decoded.items() if k in ("region", "amount", "TAGS")}
    assert record_property_values(raw, keys) == wanted
