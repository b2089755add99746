"""Record encode/decode round trips (the commit log's record layout), Java hash codes of tags and the filter over
them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.message import MessageExt
from pocketmq.common.record import decode_record, encode_record
from pocketmq.store.tags import tag_hash_code, tags_code_filter

_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=20)
_ip = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
_i64 = st.integers(-(2**63), 2**63 - 1)
_i32 = st.integers(-(2**31), 2**31 - 1)


@given(
    topic=st.text(alphabet="abcXYZ019_-%", min_size=1, max_size=60),
    body=st.binary(max_size=2000),
    properties=st.dictionaries(_text.filter(bool), _text, max_size=5),
    queue_id=_i32,
    flag=_i32,
    queue_offset=_i64,
    phys_offset=_i64,
    born=_i64,
    stored=_i64,
    born_ip=_ip,
    store_ip=_ip,
    port=st.integers(0, 65535),
    reconsume=_i32,
)
def test_record_round_trip(
    topic, body, properties, queue_id, flag, queue_offset, phys_offset, born, stored, born_ip, store_ip, port, reconsume
):
    msg = MessageExt(
        topic=topic,
        body=body,
        properties=properties,
        flag=flag,
        queue_id=queue_id,
        queue_offset=queue_offset,
        phys_offset=phys_offset,
        born_timestamp_ms=born,
        born_host=(born_ip, port),
        store_timestamp_ms=stored,
        store_host=(store_ip, port),
        reconsume_times=reconsume,
    )
    record = encode_record(msg)
    decoded, end = decode_record(record)
    assert end == len(record) == msg.store_size
    assert decoded == msg


def test_tag_hash_code_is_javas_string_hash_code():
    # Values of "...".hashCode() in Java.
    assert tag_hash_code("") == 0
    assert tag_hash_code("TagA") == 2598919
    assert tag_hash_code("hello world") == 1794106052
    assert tag_hash_code("polygenelubricants") == -2147483648
    assert tag_hash_code("日本") == 835047
    assert tag_hash_code("\U0001f600") == 0xD83D * 31 + 0xDE00  # a surrogate pair: two UTF-16 units


@pytest.mark.parametrize("expression", [None, "", "*", " * ", "||"])
def test_a_subscription_to_every_tag_filters_nothing(expression):
    assert tags_code_filter(expression) is None


@pytest.mark.parametrize(
    ("expression", "kept", "skipped"),
    [
        ("TagA", ["TagA"], ["TagB", ""]),
        (" TagA || TagB ", ["TagA", "TagB"], ["TagC", "", "TagA || TagB"]),
        ("TagA || *", ["TagA", "*"], ["TagB", ""]),  # a "*" in a list is a tag named "*", not every tag
    ],
)
def test_a_tag_list_keeps_the_units_whose_tags_code_is_one_of_its_tags(expression, kept, skipped):
    keep = tags_code_filter(expression)
    assert keep is not None
    assert all(keep(tag_hash_code(tag)) for tag in kept)
    assert not any(keep(tag_hash_code(tag)) for tag in skipped)  # "" is an untagged unit's code, 0
