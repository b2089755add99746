"""Server-side gray split for POP consumers (broker/gray_split.py) and where POP retries of gray messages go."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.pop.pop_support import running_broker, send

from pocketmq.broker.gray import place_retry_copy
from pocketmq.broker.gray_split import GrayRule, GraySplit, GraySplits, held_queues
from pocketmq.broker.groups import SubscriptionGroupConfig, group_config_from_json, group_config_to_json
from pocketmq.broker.pop.receive import PopRequest
from pocketmq.cli.gray_view import client_rows
from pocketmq.client.instance import ConsumerData
from pocketmq.client.rebalance import gray_queues
from pocketmq.common.errors import BadRequestError
from pocketmq.common.gray import GRAY_PROPERTY, gray_ratio_of
from pocketmq.common.message import Message, MessageExt, MessageQueue
from pocketmq.common.topic import TopicConfig
from pocketmq.runtime.clock import ManualClock

member_ids = st.lists(
    st.from_regex(r"10\.0\.0\.[0-9]{1,3}@[0-9]{1,5}(@gray(\[0\.25\])?)?", fullmatch=True), max_size=6, unique=True
)
RULE = GrayRule(ratio=0.25)


@given(member_ids, st.integers(1, 16), st.sampled_from([0.1, 0.25, 0.5, 1.0]))
def test_gray_members_pop_the_gray_queues_and_normal_members_the_rest(ids, queue_nums, ratio):
    split = GraySplit.of(ids, GrayRule(ratio=ratio))
    gray = [c for c in ids if "@gray" in c]
    normal = [c for c in ids if "@gray" not in c]
    for cid in ids:
        share = split.share(cid)
        if gray and normal:
            expected = {
                mq.queue_id for mq in gray_queues([MessageQueue("T", "b", q) for q in range(queue_nums)], split.ratio)
            }  # the SDK's rule, on one broker
            own = set(share.queue_ids(queue_nums))
            assert own == (expected if cid in gray else set(range(queue_nums)) - expected)
        else:  # fallback: no gray member alive (or no normal one): every queue, at once
            assert share.queue_ids(queue_nums) == list(range(queue_nums))


@given(member_ids, st.integers(1, 8))
def test_pop_retry_topic_last_queue_is_gray_while_split(ids, queue_nums):
    split = GraySplit.of(ids, RULE)
    shares = {cid: split.share(cid).retry_queue_ids(queue_nums) for cid in ids}
    for cid, queue_ids in shares.items():
        if split.active and queue_nums >= 2:
            assert queue_ids == ([queue_nums - 1] if "@gray" in cid else list(range(queue_nums - 1)))
        elif split.active:  # not grown yet: only normal retries are in it
            assert queue_ids == ([] if "@gray" in cid else list(range(queue_nums)))
        else:
            assert queue_ids == list(range(queue_nums))


def test_a_requester_not_listed_yet_counts_as_alive():
    split = GraySplit.of(["n@1"], RULE)
    assert split.share("g@2@gray").queue_ids(8) == [6, 7]  # its own receive makes the split
    assert GraySplit.of([], RULE).share("g@2@gray").queue_ids(8) == list(range(8))


def test_ratio_from_the_first_gray_id_then_the_group_attribute_then_default():
    assert gray_ratio_of("10.0.0.1@x@gray[0.25]") == 0.25
    assert gray_ratio_of("10.0.0.1@x@gray") is None and gray_ratio_of("h@gray[7]") is None
    assert GraySplit.of(["n@1", "a@gray", "b@gray[0.5]", "c@gray[0.25]"], RULE).ratio == 0.5
    assert GraySplit.of(["n@1", "a@gray"], RULE).ratio == 0.25
    assert GraySplit.of(["n@1", "a@gray"], GrayRule()).ratio == 0.1


def test_operator_rule_makes_official_client_ids_gray():
    rule = GrayRule.of({"gray.clients": "canary-*, *@4242@*", "gray.queue.ratio": "0.25"})
    assert rule.is_gray("canary-7f9c@17@0@k2j3") and rule.is_gray("web-1@4242@0@k2j3")
    assert not rule.is_gray("web-1@4243@0@k2j3")
    split = GraySplit.of(["canary-7f9c@17@0@k2j3", "web-1@18@0@k2j3"], rule)
    assert split.share("canary-7f9c@17@0@k2j3").queue_ids(8) == [6, 7]
    assert split.share("web-1@18@0@k2j3").queue_ids(8) == list(range(6))


@pytest.mark.parametrize("ratio", ["1.5", "-0.1", "abc"])
def test_a_bad_gray_ratio_is_refused_with_the_group_update(ratio):
    obj = group_config_to_json(SubscriptionGroupConfig("g", attributes={"gray.queue.ratio": ratio}))
    with pytest.raises(BadRequestError, match="gray.queue.ratio"):
        group_config_from_json(obj)


def test_group_attributes_survive_json():
    config = SubscriptionGroupConfig("g", attributes={"gray.clients": "canary-*"})
    assert group_config_from_json(group_config_to_json(config)) == config


class Topics:
    def __init__(self, queue_nums: int):
        self.config = TopicConfig("%RETRY%g_T", queue_nums, queue_nums)

    def get_or_create(self, name):
        return self.config

    def create_or_update(self, config):
        self.config = config
        return config


@pytest.mark.parametrize("gray", [True, False])
def test_pop_retry_copies_of_gray_messages_go_to_the_grown_last_queue(gray):
    topics = Topics(1)
    msg = MessageExt(topic="%RETRY%g_T", body=b"x", properties={GRAY_PROPERTY: "v2"} if gray else {})
    place_retry_copy(topics, msg)
    assert (msg.queue_id, topics.config.write_queue_nums) == ((1, 2) if gray else (0, 1))


async def test_engine_pops_only_the_share_and_revived_gray_messages_only_reach_gray(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        broker.groups.create_or_update(SubscriptionGroupConfig("G", attributes={"gray.queue.ratio": "0.25"}))
        members = {"n@1", "g@2@gray"}
        broker.gray.add_member_source(lambda group: {cid: ("T",) for cid in members} if group == "G" else {})
        await send(broker, "T", 16, queues=8)
        for q in range(8):  # one gray message per queue too
            await broker.messages.send(
                [Message.create("T", f"gray{q}", properties={GRAY_PROPERTY: "v2"})], topic="T", queue_id=q
            )

        async def pop(client_id, queue_id=-1):
            request = PopRequest("G", "T", 32, 10_000, queue_id=queue_id, client_id=client_id)
            return [
                (m.queue_id, m.body.decode(), m.reconsume_times) for m, _ in (await broker.pop.pop(request)).delivered()
            ]

        assert await pop("n@1", queue_id=7) == []  # a gray queue, asked for by a normal client: nothing
        gray_got = await pop("g@2@gray")
        assert {q for q, _, _ in gray_got} == {6, 7} and len(gray_got) == 6
        normal_got = await pop("n@1")
        assert {q for q, _, _ in normal_got} == set(range(6)) and len(normal_got) == 18
        clock.advance(10_001)  # nothing acked: everything is revived into the pop retry topic
        await broker.pop.revive.run_once(clock.now_ms())
        assert broker.topics.get("%RETRY%G_T").write_queue_nums == 2
        gray_retries = await pop("g@2@gray")
        normal_retries = await pop("n@1")
        everything = [b for _, b, _ in gray_got + normal_got]  # retries follow the message's mark, not its queue
        assert sorted(b for _, b, _ in gray_retries) == sorted(b for b in everything if b.startswith("gray"))
        assert sorted(b for _, b, _ in normal_retries) == sorted(b for b in everything if not b.startswith("gray"))
        assert {rt for _, _, rt in gray_retries + normal_retries} == {1}
        members.discard("g@2@gray")  # the gray client left: the normal one gets everything at once
        await send(broker, "T", 8, queues=8)
        assert {q for q, _, _ in await pop("n@1")} == set(range(8))


async def test_a_normal_retry_revived_before_the_retry_topic_grows_never_reaches_a_gray_client(tmp_path):
    """Revive makes the pop retry topic with one queue for a normal retry and grows it only for the first gray
    one, in a later batch or pass; a gray client popping in between must not take the normal retry."""
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        broker.groups.create_or_update(SubscriptionGroupConfig("G", attributes={"gray.queue.ratio": "0.25"}))
        broker.gray.add_member_source(lambda group: {"n@1": ("T",), "g@2@gray": ("T",)} if group == "G" else {})
        await send(broker, "T", 1, queues=8)

        async def pop(client_id):
            request = PopRequest("G", "T", 32, 10_000, client_id=client_id)
            return [(m.body.decode(), m.reconsume_times) for m, _ in (await broker.pop.pop(request)).delivered()]

        assert await pop("n@1") == [("m0", 0)]
        clock.advance(10_001)  # not acked: revived as a normal retry, the only copy of the pass
        await broker.pop.revive.run_once(clock.now_ms())
        assert broker.topics.get("%RETRY%G_T").read_queue_nums == 1  # no gray retry yet: not grown
        assert await pop("g@2@gray") == []
        assert await pop("n@1") == [("m0", 1)]


def test_describe_lists_push_reports_and_pop_shares_of_live_members_only():
    class Groups:
        def get(self, group):
            return SubscriptionGroupConfig(group, attributes={"gray.queue.ratio": "0.25"})

    splits = GraySplits(Groups())
    members = {"push@1": ("T", "%RETRY%G"), "pop@2@gray": ("T",), "pop@3": ("T",)}
    splits.add_member_source(lambda group: members)
    data = ConsumerData("G", held_queues=[MessageQueue("T", "b1", 0), MessageQueue("T", "b2", 1)]).to_json(False)
    splits.record_held("G", "push@1", held_queues(data, "b1"))
    splits.record_held("G", "gone@9", [("T", 5)])  # not a live member: not kept
    topics = {"T": TopicConfig("T", 8, 8), "%RETRY%G_T": TopicConfig("%RETRY%G_T", 2, 2)}
    rows = {r["clientId"]: r for r in splits.describe("G", topics.get)}
    assert set(rows) == {"push@1", "pop@2@gray", "pop@3"}
    assert rows["push@1"] == {"clientId": "push@1", "gray": False, "assignedBy": "client", "queues": [["T", 0]]}
    assert rows["pop@2@gray"]["queues"] == [["T", 6], ["T", 7], ["%RETRY%G_T", 1]]
    assert rows["pop@3"]["queues"] == [["T", q] for q in range(6)] + [["%RETRY%G_T", 0]]
    assert held_queues({"pmqHeldQueues": [{"topic": "T"}, "x"]}, "b1") == [] and held_queues({}, "b1") is None
    table = client_rows({"b1": {"brokerName": "b1", "clients": list(rows.values())}})
    assert [r["queues"] for r in table] == ["%RETRY%G_T:1 T:6,7", "%RETRY%G_T:0 T:0,1,2,3,4,5", "T:0"]
