"""Consumer membership notifications, client expiry, and forward-only consumer offsets."""

from pocketmq.broker.clients import ClientChannel
from pocketmq.broker.consumers import ConsumerGroupInfo, ConsumerTable
from pocketmq.broker.offsets import ConsumerOffsetManager


def channel(client_id, conn, now_ms=0):
    return ClientChannel(client_id, conn, now_ms)


def test_joining_notifies_the_other_members_only():
    table = ConsumerTable(expire_ms=1000)
    a, b = object(), object()
    assert table.heartbeat(channel("A", a), ConsumerGroupInfo("g")) == []
    notes = table.heartbeat(channel("B", b), ConsumerGroupInfo("g"))
    assert [(n.client_id, n.connection) for n in notes] == [("A", a)]
    assert table.heartbeat(channel("B", b), ConsumerGroupInfo("g")) == []  # a repeat heartbeat is not a join
    assert table.client_ids("g") == ["A", "B"]


def test_leaving_by_unregister_close_or_expiry_notifies_the_rest():
    table = ConsumerTable(expire_ms=1000)
    a, b, c = object(), object(), object()
    table.heartbeat(channel("A", a, 0), ConsumerGroupInfo("g"))
    table.heartbeat(channel("B", b, 0), ConsumerGroupInfo("g"))
    table.heartbeat(channel("C", c, 900), ConsumerGroupInfo("g"))
    assert {n.client_id for n in table.unregister("g", "A")} == {"B", "C"}
    assert {n.client_id for n in table.connection_closed(b)} == {"C"}
    table.heartbeat(channel("D", object(), 0), ConsumerGroupInfo("g"))
    assert {n.client_id for n in table.expire(now_ms=1500)} == {"C"}  # D silent for 1500 ms > 1000
    assert table.client_ids("g") == ["C"]


def test_offsets_move_forward_only_and_ignore_negative_commits(tmp_path):
    offsets = ConsumerOffsetManager(tmp_path / "offsets.json")
    assert offsets.query("g", "t", 0) is None
    assert offsets.commit("g", "t", 0, 10)
    assert not offsets.commit("g", "t", 0, 7)
    assert not offsets.commit("g", "t", 0, -1)
    assert offsets.query("g", "t", 0) == 10
    offsets.reset("g", "t", 0, 3)
    assert offsets.query("g", "t", 0) == 3


def test_offsets_survive_persist_and_load(tmp_path):
    path = tmp_path / "offsets.json"
    offsets = ConsumerOffsetManager(path)
    offsets.commit("g", "t", 2, 42)
    assert offsets.persist()
    assert not offsets.persist()  # nothing changed since
    again = ConsumerOffsetManager(path)
    again.load()
    assert again.query("g", "t", 2) == 42
