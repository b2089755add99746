"""The escape bridge: its pure choices (RocketMQ's hash and floorMod, targets on other groups only) and its
typed results against a fake name server and remoting (disabled, no target, refused, unreachable, stored)."""

from __future__ import annotations

import inspect
import types

import pytest

from pocketmq.cluster.escape import (
    ESCAPE_REPLY_MARGIN_MS,
    EscapeBridge,
    EscapeTarget,
    arrived_too_late,
    escape_kind,
    escape_targets,
    fallback_targets,
    java_string_hash,
    specific_queue,
)
from pocketmq.common.message import MessageExt
from pocketmq.common.topic import PERM_READ, TopicConfig
from pocketmq.metrics import MetricsRegistry
from pocketmq.protocol.codes import ESCAPE_PUT_MESSAGE, ResponseCode
from pocketmq.protocol.route import BrokerData, ClusterInfo, QueueData, TopicRouteData
from pocketmq.runtime.clock import ManualClock
from pocketmq.testing.fakes import FakeNameServer, FakePeer, answer, hang_up, silent
from pocketmq.testing.polling import eventually


@pytest.mark.parametrize(
    "text, java_hash",
    [  # values printed by Java's String.hashCode
        ("hello", 99162322),
        ("", 0),
        ("polygenelubricants", -2147483648),
        ("%RETRY%g_t127.0.0.1:10911", 973456835),
        ("rmq_sys_REVIVE_LOG_ha127.0.0.1:40767", -1739695908),
    ],
)
def test_java_string_hash(text, java_hash):
    assert java_string_hash(text) == java_hash


def route(masters: dict[str, str] | None = None) -> TopicRouteData:
    """Queues of groups a, b, c, a read-only group and one without a master; ``masters`` replaces the master
    addresses of groups b and c."""
    masters = masters or {}
    return TopicRouteData(
        (
            QueueData("a", 2, 2),
            QueueData("c", 2, 2),
            QueueData("b", 3, 3),
            QueueData("ro", 1, 1, perm=PERM_READ),
            QueueData("headless", 1, 1),
        ),
        (
            BrokerData("x", "a", {0: "a:0", 1: "a:1"}),
            BrokerData("x", "b", {0: masters.get("b", "b:0")}),
            BrokerData("x", "c", {0: masters.get("c", "c:0")}),
            BrokerData("x", "ro", {0: "ro:0"}),
            BrokerData("x", "headless", {1: "h:1"}),
        ),
    )


def test_targets_are_writable_queues_of_other_groups_with_a_master():
    targets = escape_targets(route(), "a")
    assert [(t.broker_name, t.queue_id) for t in targets] == [("b", 0), ("b", 1), ("b", 2), ("c", 0), ("c", 1)]
    assert targets[0].master_addr == "b:0"
    assert escape_targets(None, "a") == []


def test_specific_queue_is_floor_mod_of_the_java_hash():
    targets = escape_targets(route(), "a")
    # floorMod(-1739695908, 5) = 2 (Python's % is a floor mod; Java's % would give -3)
    assert specific_queue(targets, "rmq_sys_REVIVE_LOG_ha", "127.0.0.1:40767") == targets[2]
    assert specific_queue(targets, "polygenelubricants", "") == targets[-2147483648 % 5]


def test_fallback_is_queue_zero_of_other_masters_of_the_cluster():
    info = ClusterInfo(
        {
            "a": BrokerData("x", "a", {1: "a:1"}),
            "b": BrokerData("x", "b", {0: "b:0"}),
            "c": BrokerData("x", "c", {1: "c:1"}),
        },
        {"x": ("a", "b", "c"), "y": ("z",)},
    )
    assert fallback_targets(info, "x", "a") == [EscapeTarget("b", "b:0", 0)]
    assert fallback_targets(info, "y", "a") == []


@pytest.fixture
async def masters():
    """The masters of groups b and c: every write escaped to them is stored (SUCCESS)."""
    async with FakePeer() as b, FakePeer() as c:
        for peer in (b, c):
            peer.on(ESCAPE_PUT_MESSAGE, answer(ResponseCode.SUCCESS, "r"))
        yield {"b": b, "c": c}


def answering(masters: dict[str, FakePeer], script) -> None:
    for peer in masters.values():
        peer.on(ESCAPE_PUT_MESSAGE, script)


def addrs(masters: dict[str, FakePeer]) -> dict[str, str]:
    return {name: peer.addr for name, peer in masters.items()}


def bridge(remoting, masters, *, enabled=True, routes=None, info=None, **kwargs) -> EscapeBridge:
    names = FakeNameServer({"T": route(addrs(masters))} if routes is None else routes, info)
    return EscapeBridge(
        names,
        remoting,
        cluster_name="x",
        broker_name="a",
        store_host="127.0.0.1:10911",
        enabled=lambda: enabled,
        **kwargs,
    )


def fallback_info(masters) -> ClusterInfo:
    """Group a (this slave's) without a master, group b with one."""
    return ClusterInfo(
        {"a": BrokerData("x", "a", {1: "a:1"}), "b": BrokerData("x", "b", {0: masters["b"].addr})}, {"x": ("a", "b")}
    )


def message(topic="T") -> MessageExt:
    return MessageExt(topic=topic, body=b"body", properties={"UNIQ_KEY": "k1", "KEYS": "k"}, reconsume_times=2)


async def test_disabled_escape_fails_to_retry_without_a_call(remoting, masters):
    b = bridge(remoting, masters, enabled=False)
    result = await b.put_message(message())
    assert (result.stored, result.reason, result.need_retry) == (False, "ESCAPE_DISABLED", True)
    assert masters["b"].requests == masters["c"].requests == [] and b.failures == 1


async def test_put_message_turns_over_the_other_groups_queues_and_keeps_the_message(remoting, masters):
    b = bridge(remoting, masters)
    results = [await b.put_message(message()) for _ in range(6)]
    assert all(r.stored for r in results) and b.escaped == 6
    assert [(r.target.broker_name, r.target.queue_id) for r in results] == [
        ("b", 0),
        ("b", 1),
        ("b", 2),
        ("c", 0),
        ("c", 1),
        ("b", 0),
    ]
    assert [len(masters["b"].requests), len(masters["c"].requests)] == [4, 2]
    first = masters["b"].requests[0]
    fields = first.ext_fields
    assert (fields["b"], fields["e"], fields["j"], first.body) == ("T", "0", "2", b"body")
    assert "UNIQ_KEY\x01k1" in fields["i"]  # the message id survives the escape


async def test_specific_queue_falls_back_to_a_master_of_the_cluster_for_unrouted_topics(remoting, masters):
    b = bridge(remoting, masters, routes={}, info=fallback_info(masters))
    result = await b.put_to_specific_queue(message("%RETRY%g_T"))
    assert result.stored and result.target == EscapeTarget("b", masters["b"].addr, 0)
    unrouted = await b.put_message(message("%RETRY%g_T"))  # a due delay message needs its topic elsewhere
    assert (unrouted.stored, unrouted.reason) == (False, "NO_TARGET")


async def test_refusals_and_unreachable_targets_are_typed(remoting, masters):
    answering(masters, answer(ResponseCode.MESSAGE_ILLEGAL))
    illegal = await bridge(remoting, masters).put_to_specific_queue(message())
    assert (illegal.stored, illegal.reason, illegal.need_retry) == (False, "REFUSED_13", False)
    answering(masters, answer(ResponseCode.SYSTEM_BUSY))
    busy = await bridge(remoting, masters).put_to_specific_queue(message())
    assert (busy.stored, busy.need_retry) == (False, True)
    answering(masters, hang_up)
    down = await bridge(remoting, masters).put_message(message())
    assert (down.stored, down.reason, down.need_retry) == (False, "CONNECTION", True)
    answering(masters, silent)
    late = await bridge(remoting, masters, timeout_ms=100).put_message(message())
    assert (late.stored, late.reason, late.need_retry) == (False, "CONNECTION", True)
    # the connection that timed out is dropped: a late answer cannot meet the next write
    await eventually(lambda: masters["b"].open_connections == 0, message="b's connection dropped")
    answering(masters, answer(ResponseCode.FLUSH_SLAVE_TIMEOUT))
    weak = await bridge(remoting, masters).put_message(message())
    assert weak.stored  # stored on the target, its slave was slow


def test_escape_kind_names_what_is_written():
    def of(topic, tag=None):
        return escape_kind(MessageExt(topic=topic, body=b"", properties={"TAGS": tag} if tag else {}))

    assert [
        of("rmq_sys_REVIVE_LOG_x", "ck"),
        of("rmq_sys_REVIVE_LOG_x", "ack"),
        of("rmq_sys_REVIVE_LOG_x"),
        of("%RETRY%g_T"),
        of("%DLQ%g"),
        of("T"),
    ] == ["checkpoint", "ack", "other", "retry", "dead_letter", "other"]


async def test_escapes_count_by_kind_and_result_and_failures_by_reason(remoting, masters):
    metrics = MetricsRegistry()
    b = bridge(remoting, masters, info=fallback_info(masters), metrics=metrics)
    await b.put_message(message())
    await b.put_to_specific_queue(message("%RETRY%g_T"))
    await b.put_to_specific_queue(message("%DLQ%g"))
    ck = message("rmq_sys_REVIVE_LOG_x")
    ck.properties["TAGS"] = "ck"
    await b.put_to_specific_queue(ck)
    assert await b.put_message(message("%RETRY%g_T")) == await b.put_message(message("%RETRY%g_T"))  # NO_TARGET
    answering(masters, answer(ResponseCode.SYSTEM_BUSY))
    await b.put_to_specific_queue(ck)
    answering(masters, hang_up)
    await b.put_message(message())

    def escapes(kind, result):
        return metrics.value("pocketmq_escapes_total", kind=kind, result=result)

    assert [
        escapes("timer", "stored"),
        escapes("retry", "stored"),
        escapes("dead_letter", "stored"),
        escapes("checkpoint", "stored"),
        escapes("checkpoint", "failed"),
        escapes("timer", "failed"),
    ] == [1, 1, 1, 1, 1, 3]
    assert {
        reason: metrics.value("pocketmq_escape_failures_total", reason=reason)
        for reason in ("NO_TARGET", f"REFUSED_{ResponseCode.SYSTEM_BUSY}", "CONNECTION")
    } == {"NO_TARGET": 2, f"REFUSED_{ResponseCode.SYSTEM_BUSY}": 1, "CONNECTION": 1}
    assert (b.escaped, b.failures) == (4, 4)  # what GET_BROKER_RUNTIME_INFO shows

    off = bridge(remoting, masters, enabled=False, metrics=metrics)
    await off.put_to_specific_queue(message("%RETRY%g_T"))
    assert metrics.value("pocketmq_escape_failures_total", reason="ESCAPE_DISABLED") == 1
    assert escapes("retry", "failed") == 1


def test_a_write_arriving_when_its_answer_cannot_reach_the_sender_in_time_is_too_late():
    assert not arrived_too_late(None, 10**13)  # a sender without a deadline
    assert not arrived_too_late(10_000, 10_000 - ESCAPE_REPLY_MARGIN_MS)
    assert arrived_too_late(10_000, 10_000 - ESCAPE_REPLY_MARGIN_MS + 1)


def delivering_to(handlers, clock: ManualClock, stall: dict):
    """A script handing each escaped write to a real broker's ESCAPE_PUT_MESSAGE handler after ``stall["ms"]``
    of virtual time (a link stalled that long)."""
    sender = types.SimpleNamespace(attributes={}, remote_address="127.0.0.1:40000")

    async def deliver(request):
        clock.advance(stall["ms"])
        reply = handlers.escape_put_message(sender, request)
        return await reply if inspect.isawaitable(reply) else reply

    return deliver


async def test_the_receiver_refuses_an_escaped_write_that_arrives_after_its_senders_deadline(tmp_path, remoting):
    """A link that stalls an escaped CK or retry copy past the sender's timeout must not store it later: the
    sender counts it as failed and writes it again (a CK twice revives its messages twice)."""
    from tests.unit.pop.pop_support import running_broker

    from pocketmq.server.remoting_broker import MessagingHandlers

    clock = ManualClock(start_ms=1_795_000_000_000)
    async with running_broker(tmp_path, clock) as broker:
        broker.topics.create_or_update(TopicConfig("T", 3, 3))
        stall = {"ms": 0}
        async with FakePeer() as receiver:
            receiver.on(ESCAPE_PUT_MESSAGE, delivering_to(MessagingHandlers(broker), clock, stall))
            b = EscapeBridge(
                FakeNameServer({"T": route({"b": receiver.addr, "c": receiver.addr})}),
                remoting,
                cluster_name="x",
                broker_name="a",
                store_host="127.0.0.1:10911",
                enabled=lambda: True,
                timeout_ms=3_000,
                clock=clock,
            )
            on_time = await b.put_to_specific_queue(message())
            queue_id = on_time.target.queue_id
            assert on_time.stored and broker.store.max_queue_offset("T", queue_id) == 1
            stall["ms"] = 3_000 - ESCAPE_REPLY_MARGIN_MS + 1  # its answer could not reach the sender in time
            late = await b.put_to_specific_queue(message())
            assert (late.stored, late.reason, late.need_retry) == (False, "REFUSED_14", True)
            assert broker.store.max_queue_offset("T", queue_id) == 1  # not stored
            stall["ms"] = 0
            assert (await b.put_to_specific_queue(message())).stored  # the sender's retry
