"""Namespaces on the remoting wire (common/namespace.py): RocketMQ's NamespaceUtil rules for wrapping and
unwrapping topic and group names."""

import pytest

from pocketmq.client.config import ClientConfig
from pocketmq.common.errors import ConfigError
from pocketmq.common.message import MessageExt, MessageQueue
from pocketmq.common.namespace import Namespace, namespace_problem, unwrap, wrap


@pytest.mark.parametrize(
    ("name", "wrapped"),
    [
        ("orders", "a%orders"),
        ("%RETRY%group", "%RETRY%a%group"),
        ("%DLQ%group", "%DLQ%a%group"),
        ("a%orders", "a%orders"),  # already in the namespace: wrapping twice is harmless
        ("%RETRY%a%group", "%RETRY%a%group"),
        ("b%orders", "a%b%orders"),  # another namespace's name is a name like any other
        ("TBW102", "TBW102"),  # system topics and groups belong to no namespace
        ("SCHEDULE_TOPIC_XXXX", "SCHEDULE_TOPIC_XXXX"),
        ("rmq_sys_wheel_timer", "rmq_sys_wheel_timer"),
        ("RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_HALF_TOPIC"),
        ("CID_RMQ_SYS_tools", "CID_RMQ_SYS_tools"),
        ("", ""),
    ],
)
def test_wrap_follows_rocketmq_rules(name, wrapped):
    assert wrap("a", name) == wrapped


@pytest.mark.parametrize("name", ["orders", "%RETRY%group", "%DLQ%group", "TBW102", "CID_RMQ_SYS_tools"])
def test_unwrap_gives_back_the_users_name(name):
    assert unwrap("a", wrap("a", name)) == name


@pytest.mark.parametrize("name", ["b%orders", "%RETRY%b%group", "orders", "TBW102"])
def test_unwrap_leaves_names_of_other_namespaces_alone(name):
    assert unwrap("a", name) == name


def test_no_namespace_changes_nothing():
    assert wrap("", "orders") == "orders" and unwrap("", "a%orders") == "a%orders"


def test_queues_and_messages():
    ns = Namespace("a")
    mq = MessageQueue("orders", "broker-a", 3)
    assert ns.wrap_queue(mq) == MessageQueue("a%orders", "broker-a", 3)
    assert ns.unwrap_queue(ns.wrap_queue(mq)) == mq
    msg = MessageExt(topic="a%orders", body=b"x")
    assert ns.unwrap_message(msg) is msg and msg.topic == "orders"
    assert Namespace().wrap_queue(mq) is mq


def test_namespace_names_are_checked():
    assert namespace_problem("") is None and namespace_problem("team-a_1") is None
    assert namespace_problem("a%b") and namespace_problem("a b")
    with pytest.raises(ConfigError, match="namespace"):
        ClientConfig(namespace="a%b")
