"""Session registry of v2 clients (pocketmq.server.sessions), driven by now_ms."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.protocol.grpc_codec import ClientSettings
from pocketmq.server.sessions import Outbox, SessionRegistry


def test_heartbeat_creates_and_refreshes_then_expiry_after_the_timeout():
    reg = SessionRegistry(heartbeat_timeout_ms=1000)
    reg.heartbeat("c1", 0, client_type="PRODUCER")
    reg.heartbeat("c2", 500, client_type="SIMPLE_CONSUMER", group="g")
    assert reg.expire(999) == []
    reg.heartbeat("c1", 900)
    [gone] = reg.expire(1500)
    assert gone.client_id == "c2" and gone.group == "g" and "c2" not in reg and "c1" in reg
    assert [s.client_id for s in reg.expire(1900)] == ["c1"] and len(reg) == 0


def test_a_late_heartbeat_never_moves_liveness_back():
    reg = SessionRegistry(heartbeat_timeout_ms=1000)
    reg.heartbeat("c", 800)
    reg.heartbeat("c", 100)
    assert reg.get("c").last_heartbeat_ms == 800


def test_settings_update_the_session():
    reg = SessionRegistry()
    s = reg.update_settings("c", 5, ClientSettings("PRODUCER", None, ("a", "b")), "")
    assert (s.client_type, s.topics) == ("PRODUCER", ("a", "b"))


def test_consumers_of_a_group_follow_group_changes_removal_and_expiry():
    reg = SessionRegistry(heartbeat_timeout_ms=1000)
    reg.update_settings("a", 0, ClientSettings("SIMPLE_CONSUMER", "g", ("t",)), "")
    reg.update_settings("b", 500, ClientSettings("SIMPLE_CONSUMER", "g", ("t", "u")), "")
    reg.update_settings("p", 500, ClientSettings("PRODUCER", None, ("t",)), "")
    assert reg.consumers_of("g") == {"a": ("t",), "b": ("t", "u")}
    reg.update_settings("b", 600, ClientSettings("SIMPLE_CONSUMER", "h", ("u",)), "")  # moved to h
    assert reg.consumers_of("g") == {"a": ("t",)} and reg.consumers_of("h") == {"b": ("u",)}
    reg.remove("b")
    assert reg.consumers_of("h") == {}
    reg.expire(1000)  # a's last heartbeat was at 0
    assert reg.consumers_of("g") == {} and "p" in reg


async def test_remove_drops_at_once_and_closes_the_stream():
    reg = SessionRegistry()
    outbox = reg.open_stream("c", 0)
    assert reg.get("c").push("cmd")
    assert reg.remove("c").client_id == "c" and "c" not in reg
    assert outbox.closed
    assert await outbox.get() == "cmd"  # what was queued is still drained ...
    assert await outbox.get() is None  # ... then the stream ends
    assert reg.remove("c") is None


async def test_expiry_closes_the_stream():
    reg = SessionRegistry(heartbeat_timeout_ms=10)
    outbox = reg.open_stream("c", 0)
    reg.expire(10)
    assert outbox.closed and await outbox.get() is None


def test_a_reopened_stream_replaces_the_old_one():
    reg = SessionRegistry()
    first = reg.open_stream("c", 0)
    second = reg.open_stream("c", 1)
    assert first.closed and not second.closed and reg.get("c").outbox is second
    reg.close_stream("c", first)  # the old stream's end does not detach the new one
    assert reg.get("c").outbox is second
    reg.close_stream("c", second)
    assert reg.get("c").outbox is None and not reg.get("c").push("x")


async def test_outbox_is_bounded_and_wakes_a_waiting_reader():
    box = Outbox(capacity=2)
    reader = asyncio.ensure_future(box.get())
    await asyncio.sleep(0)
    assert box.offer(1)
    assert await asyncio.wait_for(reader, 1) == 1
    assert box.offer(2) and box.offer(3) and not box.offer(4)
    assert len(box) == 2 and repr(box) == "<Outbox 2/2>"
    box.close()
    assert not box.offer(5)


def test_invalid_settings_are_refused():
    with pytest.raises(ValueError):
        SessionRegistry(heartbeat_timeout_ms=0)
    with pytest.raises(ValueError):
        Outbox(capacity=0)
