"""Gray release on the client: settings, client id, the gray queue selector, the producer's choice of it,
and the split of a retry topic (docs/gray.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.client.config import ClientConfig
from pocketmq.client.instance import ClientInstance
from pocketmq.client.producer import AsyncProducer
from pocketmq.client.queue_select import GraySelector, RetryTopicSelector, RoundRobinSelector
from pocketmq.client.rebalance import GrayAllocator, gray_queues, gray_retry_queues
from pocketmq.client.route_view import TopicRouteView
from pocketmq.common.errors import ClientError, ConfigError
from pocketmq.common.gray import GRAY_PROPERTY, is_gray_message
from pocketmq.common.message import Message, MessageQueue

QUEUES = [MessageQueue("T", b, q) for b in ("a", "b") for q in range(8)]


ROUTE = TopicRouteView("T", write_queues=tuple(QUEUES))  # a topic without a gray ratio of its own


def message(gray: bool) -> Message:
    return Message.create("T", b"x", properties={GRAY_PROPERTY: "v2"} if gray else {})


def test_gray_client_id_and_settings():
    assert ClientInstance(ClientConfig(instance_name="i", client_ip="10.0.0.1")).client_id == "10.0.0.1@i"
    gray = ClientConfig(instance_name="i", client_ip="10.0.0.1", enable_gray_switch=True)
    assert ClientInstance(gray).client_id == "10.0.0.1@i@gray[0.1]"
    assert gray.gray_queue_ratio == 0.1
    with pytest.raises(ConfigError, match="gray_queue_ratio"):
        ClientConfig(gray_queue_ratio=1.5)


def test_gray_property_values():
    assert is_gray_message({GRAY_PROPERTY: "v2"}) and is_gray_message({GRAY_PROPERTY: "true"})
    assert not is_gray_message({}) and not is_gray_message({GRAY_PROPERTY: "false"})


@given(st.sampled_from([0.1, 0.25, 0.5, 0.8]), st.booleans(), st.integers(0, 100))
def test_selector_keeps_gray_and_normal_apart(ratio, gray, start):
    selector = GraySelector(ratio, RoundRobinSelector(start))
    gray_set = gray_queues(QUEUES, ratio)
    for _ in range(20):
        assert (selector.select(QUEUES, message(gray), frozenset()) in gray_set) == gray


def test_selector_avoids_brokers_within_its_part():
    chosen = {GraySelector(0.25).select(QUEUES, message(True), frozenset({"a"})) for _ in range(10)}
    assert chosen <= {MessageQueue("T", "b", 6), MessageQueue("T", "b", 7)} and chosen


@pytest.mark.parametrize("ratio, gray, missing", [(1.0, False, "no normal queues"), (0.0, True, "no gray queues")])
def test_selector_says_clearly_when_a_part_is_empty(ratio, gray, missing):
    with pytest.raises(ClientError, match=missing):
        GraySelector(ratio).select(QUEUES, message(gray), frozenset())
    GraySelector(ratio).select(QUEUES, message(not gray), frozenset())  # the other part still works


def test_gray_producer_marks_messages_and_uses_gray_queues():
    producer = AsyncProducer(ClientConfig(enable_gray_switch=True, gray_tag="v2", gray_queue_ratio=0.25))
    msg = Message.create("T", b"x")
    producer._mark_gray(msg)
    assert msg.properties[GRAY_PROPERTY] == "v2"
    assert producer._selector_for(msg, ROUTE).select(QUEUES, msg, frozenset()) in gray_queues(QUEUES, 0.25)


def test_normal_producer_routes_only_marked_messages_through_the_gray_selector():
    producer = AsyncProducer(ClientConfig(gray_queue_ratio=0.25))
    plain = Message.create("T", b"x")
    producer._mark_gray(plain)
    assert GRAY_PROPERTY not in plain.properties
    assert producer._selector_for(plain, ROUTE) is producer.selector  # no gray rollout: all queues, as before
    chosen = producer._selector_for(message(True), ROUTE).select(QUEUES, message(True), frozenset())
    assert chosen in gray_queues(QUEUES, 0.25)


TOPIC_RATIOS = {"a": 0.25, "b": 0.5}  # the topic's own ratio on each broker, as its route carries it


@pytest.mark.parametrize("selector", [None, GraySelector(0.1)])
@pytest.mark.parametrize("config", [ClientConfig(), ClientConfig(enable_gray_switch=True, gray_queue_ratio=0.1)])
def test_on_a_topic_with_a_ratio_every_producer_splits_by_it(selector, config):
    """No selector set, a gray or a normal producer, a GraySelector of another ratio: the topic's ratio wins."""
    producer = AsyncProducer(config, selector=selector)
    route = TopicRouteView("T", write_queues=tuple(QUEUES), gray_ratios=TOPIC_RATIOS)
    topic_gray = gray_queues(QUEUES, 0.1, TOPIC_RATIOS)
    assert {(q.broker_name, q.queue_id) for q in topic_gray} == {("a", 6), ("a", 7), *(("b", i) for i in range(4, 8))}
    for gray in (False, True):
        msg = message(gray)
        chosen = {producer._selector_for(msg, route).select(QUEUES, msg, frozenset()) for _ in range(40)}
        assert chosen == (topic_gray if gray else set(QUEUES) - topic_gray)


def test_a_topic_ratio_of_zero_ends_the_rollout_so_gray_messages_go_anywhere():
    producer = AsyncProducer(ClientConfig(enable_gray_switch=True))
    route = TopicRouteView("T", write_queues=tuple(QUEUES), gray_ratios={"a": 0.0, "b": 0.0})
    msg = message(True)
    assert {producer._selector_for(msg, route).select(QUEUES, msg, frozenset()) for _ in range(40)} == set(QUEUES)


def test_consumers_allocate_by_the_topic_ratio_over_their_own():
    assignment = GrayAllocator(ratio=0.1, topic_ratios=TOPIC_RATIOS)(QUEUES, ["n1", "n2", "x@g@gray"])
    assert set(assignment["x@g@gray"]) == gray_queues(QUEUES, 0.1, TOPIC_RATIOS)
    assert set(assignment["n1"] + assignment["n2"]) == set(QUEUES) - gray_queues(QUEUES, 0.1, TOPIC_RATIOS)


def test_public_gray_names_come_from_the_client_package():
    import pocketmq.client as client

    assert client.GraySelector is GraySelector and client.GrayAllocator is GrayAllocator
    assert client.GRAY_PROPERTY == GRAY_PROPERTY


def test_retry_topic_split_is_the_last_queue_of_brokers_with_two_or_more():
    retry = [MessageQueue("%RETRY%g", "a", 0), MessageQueue("%RETRY%g", "a", 1), MessageQueue("%RETRY%g", "b", 0)]
    assert gray_retry_queues(retry) == {MessageQueue("%RETRY%g", "a", 1)}
    assignment = GrayAllocator(retry_split=True)(retry, ["n1", "n2", "x@g@gray"])
    assert assignment["x@g@gray"] == [MessageQueue("%RETRY%g", "a", 1)]
    assert GrayAllocator(retry_split=True)(retry, ["n1"])["n1"] == sorted(retry)


@pytest.mark.parametrize("selector", [None, GraySelector(0.25)])
@pytest.mark.parametrize("config", [ClientConfig(), ClientConfig(enable_gray_switch=True)])
def test_a_send_to_a_retry_topic_keeps_to_the_retry_split(selector, config):
    """A dead letter resent to its group's retry topic (dlq resend, the console) by any producer: a normal one
    never reaches the gray retry queue, a gray one only that queue (or any where no broker splits)."""
    producer = AsyncProducer(config, selector=selector)
    retry = [MessageQueue("%RETRY%g", b, q) for b in ("a", "b") for q in range(3)] + [MessageQueue("%RETRY%g", "c", 0)]
    route = TopicRouteView("%RETRY%g", write_queues=tuple(retry))
    gray_retry = {MessageQueue("%RETRY%g", "a", 2), MessageQueue("%RETRY%g", "b", 2)}
    for gray in (False, True):
        msg = Message.create("%RETRY%g", b"x", properties={GRAY_PROPERTY: "v2"} if gray else {})
        chosen = {producer._selector_for(msg, route).select(retry, msg, frozenset()) for _ in range(40)}
        assert chosen == (gray_retry if gray else set(retry) - gray_retry)
    unsplit = [MessageQueue("%RETRY%g", "c", 0)]
    assert RetryTopicSelector().select(unsplit, message(True), frozenset()) == unsplit[0]
