"""Broker-side gray placement of sends that name no queue (official gRPC producers; docs/gray.md)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.pop.pop_support import pop, running_broker

from pocketmq.broker.gray_split import GrayRule, GraySplit
from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.messages import select_queue
from pocketmq.broker.topics import validate_topic_config
from pocketmq.client.rebalance import gray_queues
from pocketmq.common.errors import BadRequestError
from pocketmq.common.gray import GRAY_PROPERTY, gray_queue_count, gray_ratio_problem, placement_queues
from pocketmq.common.message import Message, MessageQueue
from pocketmq.common.topic import TopicConfig
from pocketmq.protocol.remoting_headers import HeaderFields
from pocketmq.protocol.route import create_topic_fields, topic_config_from_obj, topic_config_to_obj
from pocketmq.server.remoting_admin import topic_config_from_header

ratios = st.one_of(st.none(), st.floats(0.0, 1.0))


@given(st.integers(1, 64), ratios, st.booleans())
def test_placement_agrees_with_the_sdk_gray_queues_or_uses_every_queue(queue_nums, topic_ratio, gray):
    allowed = set(placement_queues(queue_nums, topic_ratio, gray))
    ratio = 0.1 if topic_ratio is None else topic_ratio
    sdk_gray = {mq.queue_id for mq in gray_queues([MessageQueue("T", "b", q) for q in range(queue_nums)], ratio)}
    if gray_queue_count(queue_nums, ratio) in (0, queue_nums):  # no gray or no normal queue: no split
        assert allowed == set(range(queue_nums))
    elif gray:
        assert allowed == sdk_gray
    elif topic_ratio is None:  # a topic without a ratio of its own: normal messages keep every queue
        assert allowed == set(range(queue_nums))
    else:
        assert allowed == set(range(queue_nums)) - sdk_gray


@given(
    st.integers(2, 64),
    st.floats(0.01, 0.99),
    st.lists(st.booleans(), min_size=1, max_size=200),
    st.integers(0, 1 << 20),
)
def test_gray_messages_only_on_gray_queues_normal_only_on_normal_and_spread(queue_nums, ratio, kinds, start):
    topic = TopicConfig("T", queue_nums, queue_nums, gray_queue_ratio=ratio)
    gray_count = gray_queue_count(queue_nums, ratio)
    turns = {True: start, False: start}  # MessageService counts the turns of each kind apart
    placed: dict[bool, Counter] = {True: Counter(), False: Counter()}
    for gray in kinds:
        placed[gray][select_queue(topic, None, turns[gray], gray)] += 1
        turns[gray] += 1
    if gray_count == queue_nums:  # every queue is gray: no split
        assert set(placed[False]) <= set(range(queue_nums))
        return
    first_gray = queue_nums - gray_count
    assert set(placed[True]) <= set(range(first_gray, queue_nums))
    assert set(placed[False]) <= set(range(first_gray))
    for gray, part in ((True, range(first_gray, queue_nums)), (False, range(first_gray))):
        counts = [placed[gray][q] for q in part]  # round robin within the part: every queue, evenly
        if sum(counts):
            assert max(counts) - min(counts) <= 1


@given(st.text(min_size=1, max_size=20), st.booleans())
def test_a_message_group_keeps_one_queue_within_its_kind(group, gray):
    topic = TopicConfig("T", 8, 8, gray_queue_ratio=0.25)
    queues = {select_queue(topic, group, turn, gray) for turn in range(5)}
    assert len(queues) == 1 and queues <= ({6, 7} if gray else set(range(6)))


async def test_sends_without_a_queue_are_placed_by_the_rule_on_a_real_broker(tmp_path):
    async with running_broker(tmp_path) as broker:
        broker.topics.create_or_update(TopicConfig("split", 8, 8, gray_queue_ratio=0.25))
        broker.topics.create_or_update(TopicConfig("plain", 8, 8))

        async def queue_of(topic: str, gray: bool, group: str | None = None, batch: bool = False) -> set[int]:
            props = {GRAY_PROPERTY: "v2"} if gray else {}
            messages = [
                Message.create(topic, "x", properties=props, message_group=group) for _ in range(2 if batch else 1)
            ]
            return {r.queue_id for r in await broker.messages.send(messages, topic=topic, batch=batch)}

        gray, normal = set(), set()
        for _ in range(12):  # interleaved: each kind still visits all of its queues
            gray |= await queue_of("split", True)
            normal |= await queue_of("split", False)
        assert (gray, normal) == ({6, 7}, set(range(6)))
        assert {q for _ in range(4) for q in await queue_of("split", True, group="order-1")} <= {6, 7}
        assert len({q for _ in range(4) for q in await queue_of("split", False, group="order-1")} - {6, 7}) == 1
        assert await queue_of("split", True, batch=True) <= {6, 7}
        # no ratio of its own: gray messages to the default 0.1's gray queue, normal ones everywhere (opt-in)
        assert {q for _ in range(4) for q in await queue_of("plain", True)} == {7}
        assert {q for _ in range(16) for q in await queue_of("plain", False)} == set(range(8))
        assert await broker.messages.send(
            [Message.create("split", "x", properties={GRAY_PROPERTY: "v2"})], topic="split", queue_id=0
        )  # a sender's own queue choice stands


async def test_the_topic_ratio_wins_over_the_groups_for_pops(tmp_path):
    split = GraySplit.of(["n@1", "g@2@gray[0.25]"], GrayRule(ratio=0.25))
    assert split.share("g@2@gray[0.25]").queue_ids(8, 0.5) == [4, 5, 6, 7]
    assert split.share("n@1").queue_ids(8, 0.5) == [0, 1, 2, 3]
    async with running_broker(tmp_path) as broker:
        broker.topics.create_or_update(TopicConfig("T", 8, 8, gray_queue_ratio=0.5))
        broker.groups.create_or_update(SubscriptionGroupConfig("G", attributes={"gray.queue.ratio": "0.25"}))
        broker.gray.add_member_source(lambda group: {"n@1": ("T",), "g@2@gray": ("T",)} if group == "G" else {})
        for i in range(8):
            await broker.messages.send([Message.create("T", f"g{i}", properties={GRAY_PROPERTY: "v2"})], topic="T")
            await broker.messages.send([Message.create("T", f"n{i}")], topic="T")
        gray_got = await pop(broker, "G", "T", client_id="g@2@gray")
        normal_got = await pop(broker, "G", "T", client_id="n@1")
        assert sorted(m.body.decode() for m, _ in gray_got) == sorted(f"g{i}" for i in range(8))
        assert sorted(m.body.decode() for m, _ in normal_got) == sorted(f"n{i}" for i in range(8))


def test_the_ratio_travels_as_a_topic_attribute_and_an_update_without_it_keeps_it():
    config = TopicConfig("T", 8, 8, gray_queue_ratio=0.25)
    fields = create_topic_fields(config)
    assert "+gray.queue.ratio=0.25" in fields["attributes"].split(",")
    parsed = topic_config_from_header(
        HeaderFields({k: str(v) for k, v in fields.items()}), current=None, default_queue_nums=8
    )
    assert parsed == config
    assert topic_config_from_obj("T", topic_config_to_obj(config)) == config
    assert "gray.queue.ratio" not in create_topic_fields(TopicConfig("T", 8, 8))["attributes"]

    def update(plain: TopicConfig, current: TopicConfig | None) -> TopicConfig:
        h = HeaderFields({k: str(v) for k, v in create_topic_fields(plain).items()})
        return topic_config_from_header(h, current=current, default_queue_nums=8)

    plain_update = TopicConfig("T", 16, 16)
    assert update(plain_update, config) == TopicConfig("T", 16, 16, gray_queue_ratio=0.25)
    assert update(TopicConfig("T", 8, 8, gray_queue_ratio=0.0), config).gray_queue_ratio == 0.0
    assert update(plain_update, None) == plain_update


@pytest.mark.parametrize("ratio", ["1.5", "-0.1", "abc", "nan"])
def test_a_bad_topic_ratio_is_refused(ratio):
    h = HeaderFields(
        {
            "topic": "T",
            "readQueueNums": "8",
            "writeQueueNums": "8",
            "attributes": f"+message.type=MIXED,+gray.queue.ratio={ratio}",
        }
    )
    with pytest.raises(BadRequestError, match="gray.queue.ratio"):
        topic_config_from_header(h, current=None, default_queue_nums=8)
    stored = topic_config_to_obj(TopicConfig("T", 8, 8)) | {"attributes": {"gray.queue.ratio": ratio}}
    assert topic_config_from_obj("T", stored).gray_queue_ratio is None  # a stored bad one: not split


@pytest.mark.parametrize(
    "queues, ratio",
    [(1, 0.1), (4, 1.0), (8, 0.9), (2, 0.6)],  # ceil(n * ratio) == n: every queue gray
)
def test_a_ratio_that_leaves_no_normal_queue_is_refused(queues, ratio):
    with pytest.raises(BadRequestError, match=f"makes all {queues} queues gray"):
        validate_topic_config(TopicConfig("T", queues, queues, gray_queue_ratio=ratio))
    with pytest.raises(BadRequestError, match="makes all 1 queues gray"):  # fewer queues under a kept ratio
        validate_topic_config(TopicConfig("T", 1, 8, gray_queue_ratio=0.25))
    for fine in (TopicConfig("T", queues, queues, gray_queue_ratio=0.0), TopicConfig("T", 8, 8, gray_queue_ratio=0.8)):
        validate_topic_config(fine)  # 0 ends a rollout; 0.8 of 8 leaves 1 normal queue
    assert gray_ratio_problem(queues, ratio) is not None and gray_ratio_problem(queues + 8, ratio / 2) is None
