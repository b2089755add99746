"""Route views: masters only, write/read queues by permission, interleaved write queues; the admin's
"route shows the created queues" check."""

from __future__ import annotations

from pocketmq.client.admin import brokers_showing_queues
from pocketmq.client.route_view import build_route_view
from pocketmq.common.message import MessageQueue
from pocketmq.common.topic import PERM_READ, PERM_READ_WRITE, PERM_WRITE
from pocketmq.protocol.route import BrokerData, QueueData, TopicRouteData


def route(*queue_datas: QueueData, masters=("a", "b")) -> TopicRouteData:
    brokers = [
        BrokerData("c", name, {0: f"10.0.0.{i}:10911", 1: f"10.0.1.{i}:10911"}) for i, name in enumerate(masters)
    ]
    brokers.append(BrokerData("c", "slave-only", {1: "10.0.2.1:10911"}))
    return TopicRouteData(tuple(queue_datas), tuple(brokers))


def test_view_lists_master_addresses_and_interleaved_write_queues():
    data = route(QueueData("a", 2, 2, PERM_READ_WRITE), QueueData("b", 2, 2, PERM_READ_WRITE))
    view = build_route_view("t", data.queue_datas, data.broker_datas)
    assert view.master_addrs == {"a": "10.0.0.0:10911", "b": "10.0.0.1:10911"}
    assert [(q.broker_name, q.queue_id) for q in view.write_queues] == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    assert view.read_queues == tuple(sorted(view.write_queues))
    assert view.broker_names == ["a", "b"]
    assert repr(view) == "<TopicRouteView t brokers=['a', 'b'] write=4 read=4>"


def test_permissions_and_queue_numbers_decide_read_and_write_queues():
    data = route(QueueData("a", 4, 2, PERM_READ), QueueData("b", 1, 3, PERM_WRITE))
    view = build_route_view("t", data.queue_datas, data.broker_datas)
    assert view.write_queues == tuple(MessageQueue("t", "b", i) for i in range(3))
    assert view.read_queues == tuple(MessageQueue("t", "a", i) for i in range(4))


def test_a_broker_without_a_master_is_read_through_its_slave_and_never_written():
    data = route(QueueData("a", 2, 2), QueueData("slave-only", 2, 2))
    view = build_route_view("t", data.queue_datas, data.broker_datas)
    assert {q.broker_name for q in view.write_queues} == {"a"}
    assert {q.broker_name for q in view.read_queues} == {"a", "slave-only"}
    assert "slave-only" not in view.master_addrs
    assert view.readable_broker_names == ["a", "slave-only"]  # the brokers holding its read queues
    assert view.broker_addrs["a"] == "10.0.0.0:10911" and view.broker_addrs["slave-only"] == "10.0.2.1:10911"


def test_a_broker_that_left_the_route_has_no_queue_in_the_view():
    before = route(QueueData("a", 2, 2), QueueData("b", 2, 2))
    after = route(QueueData("a", 2, 2), masters=("a",))
    assert {q.broker_name for q in build_route_view("t", before.queue_datas, before.broker_datas).write_queues} == {
        "a",
        "b",
    }
    view = build_route_view("t", after.queue_datas, after.broker_datas)
    assert {q.broker_name for q in view.write_queues} == {"a"} and "b" not in view.master_addrs


def test_a_broker_shows_the_queues_when_the_route_lists_it_with_the_count():
    data = route(QueueData("a", 4, 4), QueueData("b", 8, 8), QueueData("d", 4, 2))
    assert brokers_showing_queues(data, ["a"], 4) == ["a"]
    assert brokers_showing_queues(data, ["a", "b", "c", "d"], 4) == ["a"]
    assert brokers_showing_queues(data, ["b", "c"], 8) == ["b"]


def test_the_view_carries_the_topic_s_gray_ratio_of_each_reachable_broker():
    data = route(
        QueueData("a", 4, 4, gray_queue_ratio=0.25),
        QueueData("b", 4, 4),
        QueueData("gone", 4, 4, gray_queue_ratio=0.5),
        masters=("a", "b"),
    )
    assert build_route_view("T", data.queue_datas, data.broker_datas).gray_ratios == {"a": 0.25}
