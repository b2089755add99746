"""The transaction service in a real in-process broker, in virtual time (ManualClock): half messages stay out of
their topic, an ending applies once, checks go to a live producer of the group with durable counts, a message no
one answers is put aside with its reason and can be put back, a restart goes on where it was, and a slave acting
as master escapes every pending message once."""

import pytest

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.transaction.decision import Commit, EndRequest
from pocketmq.broker.transaction.records import DISCARD_TOPIC, PROGRESS_GROUP
from pocketmq.common import properties as props
from pocketmq.common.errors import IllegalMessageError, NoPermissionError
from pocketmq.common.message import SYSFLAG_TRANSACTION_COMMIT, Message
from pocketmq.common.topic import TRANS_HALF_TOPIC, MessageType, TopicConfig
from pocketmq.protocol.codes import ResponseCode
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.write_result import STORED, WriteResult

GROUP = "tx-group"


class FakeChannel:
    def __init__(self):
        self.checks = []
        self.is_open = True
        self.writable = True

    def send_check(self, check):
        self.checks.append(check)
        return True


def make_broker(tmp_path, clock, **settings):
    config = BrokerConfig(
        data_dir=tmp_path,
        remoting_port=0,
        transaction_timeout_ms=6_000,
        transaction_check_interval_ms=30_000,
        transaction_check_max=3,
        **settings,
    )
    return Broker(config, clock=clock)


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
async def broker(tmp_path, clock):
    b = make_broker(tmp_path, clock)
    await b.start(remoting_port=10911)
    yield b
    await b.shutdown()


@pytest.fixture
def producer(broker):
    channel = FakeChannel()
    broker.transaction_channels.add_source(lambda group: [channel] if group == GROUP else [])
    return channel


def visible(broker, topic="t", queue_id=0):
    return broker.store.get_messages(topic, queue_id, 0, 1000, max_bytes=1 << 24).messages()


async def send_half(broker, body="order-1", topic="t", **properties):
    msg = Message.create(topic, body, tags="created", properties={props.TRANSACTION_PREPARED: "true", **properties})
    msg.properties[props.UNIQ_KEY] = f"ID-{body}"
    [result] = await broker.messages.send(
        [msg], topic=topic, queue_id=0, producer_group=GROUP, born_timestamp_ms=broker.clock.now_ms()
    )
    return result


def end_request(result, commit, *, group=GROUP, from_check=False, **fields):
    return EndRequest(
        group, result.queue_offset, result.phys_offset, commit, from_check, result.transaction_id, **fields
    )


async def rounds(broker, clock, until_ms, step_ms=1_000):
    start = clock.now_ms()
    while clock.now_ms() - start < until_ms:
        clock.advance(step_ms)
        await broker.transactions.run_round()


async def test_half_message_waits_out_of_its_topic_until_committed_once(broker):
    result = await send_half(broker)
    assert (result.topic, result.queue_id, result.transaction_id) == ("t", 0, "ID-order-1")
    assert visible(broker) == []
    [half] = visible(broker, TRANS_HALF_TOPIC)
    assert half.properties[props.REAL_TOPIC] == "t" and half.properties[props.PRODUCER_GROUP] == GROUP
    assert half.queue_offset == result.queue_offset
    outcome = await broker.transactions.end(end_request(result, Commit.COMMIT))
    assert (outcome.code, outcome.result) == (ResponseCode.SUCCESS, "COMMIT")
    [committed] = visible(broker)
    assert committed.body == b"order-1" and committed.tags == "created" and committed.uniq_key == "ID-order-1"
    assert committed.sys_flag & 0xC == SYSFLAG_TRANSACTION_COMMIT
    assert committed.prepared_transaction_offset == half.phys_offset
    for gone in (props.REAL_TOPIC, props.REAL_QUEUE_ID, props.TRANSACTION_PREPARED, "PMQ_TRAN_OP_FROM"):
        assert gone not in committed.properties
    again = await broker.transactions.end(end_request(result, Commit.COMMIT, from_check=True))
    assert again.result == "ALREADY_RESOLVED"
    rolled = await broker.transactions.end(end_request(result, Commit.ROLLBACK))
    assert rolled.result == "ALREADY_RESOLVED"
    assert len(visible(broker)) == 1
    metrics = broker.metrics
    assert metrics.value("pocketmq_transaction_resolutions_total", source="CLIENT", result="COMMIT") == 1
    assert metrics.value("pocketmq_transaction_resolutions_total", source="CLIENT", result="ALREADY_RESOLVED") == 1


async def test_rollback_and_unknown(broker, clock, producer):
    rolled = await send_half(broker, "a")
    unknown = await send_half(broker, "b")
    assert (await broker.transactions.end(end_request(rolled, Commit.ROLLBACK))).result == "ROLLBACK"
    assert (await broker.transactions.end(end_request(unknown, Commit.UNKNOWN))).result == "UNKNOWN"
    await rounds(broker, clock, 7_000)
    assert [c.transaction_id for c in producer.checks] == ["ID-b"]
    assert visible(broker) == []


async def test_bad_endings_change_nothing(broker):
    result = await send_half(broker)
    service = broker.transactions

    async def refused(request):
        outcome = await service.end(request)
        assert outcome.code != ResponseCode.SUCCESS
        return outcome.result

    assert await refused(end_request(result, Commit.COMMIT, group="other")) == "PRODUCER_GROUP"
    wrong = EndRequest(GROUP, result.queue_offset + 1, result.phys_offset, Commit.COMMIT, False)
    assert await refused(wrong) == "QUEUE_OFFSET"
    assert await refused(EndRequest(GROUP, 0, result.phys_offset + 3, Commit.COMMIT, False)) == "NOT_FOUND"
    assert await refused(EndRequest(GROUP, 0, 10**12, Commit.COMMIT, False)) == "NOT_FOUND"
    forged = EndRequest(GROUP, result.queue_offset, result.phys_offset, Commit.COMMIT, False, "FORGED")
    assert await refused(forged) == "TRANSACTION_ID"
    plain = (await broker.messages.send([Message.create("t", "plain")], topic="t", queue_id=1))[0]
    assert await refused(EndRequest(GROUP, plain.queue_offset, plain.phys_offset, Commit.COMMIT, False)) == "NOT_FOUND"
    assert visible(broker) == []
    assert (await service.end(end_request(result, Commit.COMMIT))).result == "COMMIT"


async def test_topic_type_and_reject_switch(broker):
    broker.topics.create_or_update(TopicConfig("plain", 1, 1, message_type=MessageType.NORMAL))
    with pytest.raises(IllegalMessageError):
        await send_half(broker, topic="plain")
    broker.topics.create_or_update(TopicConfig("txt", 1, 1, message_type=MessageType.TRANSACTION))
    await send_half(broker, topic="txt")
    broker.update_config({"reject_transaction_message": "true"})
    with pytest.raises(NoPermissionError):
        await send_half(broker, "c", topic="txt")


async def test_checks_go_to_a_producer_of_the_group_and_their_count_is_durable(broker, clock, producer):
    result = await send_half(broker)
    await rounds(broker, clock, 5_000)
    assert producer.checks == []
    await rounds(broker, clock, 1_000)
    [check] = producer.checks
    assert (check.half.queue_offset, check.half.phys_offset, check.transaction_id) == (
        result.queue_offset,
        result.phys_offset,
        "ID-order-1",
    )
    assert check.broker_name == broker.broker_name
    await rounds(broker, clock, 29_000)
    assert len(producer.checks) == 1
    await rounds(broker, clock, 1_000)
    assert len(producer.checks) == 2
    assert broker.metrics.value("pocketmq_transaction_checks_total", result="sent") == 2
    # the producer answers the second check: commit
    answer = EndRequest(GROUP, check.half.queue_offset, check.half.phys_offset, Commit.COMMIT, True, "ID-order-1")
    assert (await broker.transactions.end(answer)).result == "COMMIT"
    await rounds(broker, clock, 60_000, step_ms=5_000)
    assert len(producer.checks) == 2 and len(visible(broker)) == 1


async def test_unanswered_message_is_put_aside_with_its_reason_then_resumed(broker, clock):
    result = await send_half(broker)
    await rounds(broker, clock, 6_000 + 30_000 * 3, step_ms=2_000)  # 3 checks (nobody online), then the discard
    [discarded] = visible(broker, DISCARD_TOPIC)
    assert discarded.properties["PMQ_TRAN_DISCARD_REASON"] == "MAX_CHECKS"
    assert discarded.properties["TRANSACTION_CHECK_TIMES"] == "3"
    assert discarded.uniq_key == "ID-order-1" and discarded.body == b"order-1"
    assert broker.metrics.value("pocketmq_transaction_checks_total", result="no_producer") == 3
    assert broker.metrics.value("pocketmq_transaction_discards_total", reason="MAX_CHECKS") == 1
    assert (await broker.transactions.pending_by_topic()) == {}
    assert (await broker.transactions.end(end_request(result, Commit.COMMIT))).result == "ALREADY_RESOLVED"
    assert [m.uniq_key for m in broker.transactions.discarded(10)] == ["ID-order-1"]

    resumed = await broker.transactions.resume(discarded.phys_offset, broker.messages.send)
    with pytest.raises(Exception, match="put back already"):
        await broker.transactions.resume(discarded.phys_offset, broker.messages.send)
    await broker.transactions.run_round()
    assert (await broker.transactions.pending_by_topic())["t"]["pending"] == 1
    answer = EndRequest(GROUP, resumed.queue_offset, resumed.phys_offset, Commit.COMMIT, True)
    assert (await broker.transactions.end(answer)).result == "COMMIT"
    assert [m.body for m in visible(broker)] == [b"order-1"]


async def test_restart_keeps_pending_messages_their_counts_and_nothing_ended(tmp_path, clock):
    broker = make_broker(tmp_path, clock)
    await broker.start(remoting_port=10911)
    results = [await send_half(broker, f"m{i}") for i in range(6)]
    await broker.transactions.end(end_request(results[0], Commit.COMMIT))
    await broker.transactions.end(end_request(results[1], Commit.ROLLBACK))
    await rounds(broker, clock, 6_000)  # first check of m2..m5
    await broker.transactions.end(end_request(results[2], Commit.COMMIT, from_check=True))
    await broker.shutdown()

    broker = make_broker(tmp_path, clock)
    channel = FakeChannel()
    broker.transaction_channels.add_source(lambda group: [channel])
    await broker.start(remoting_port=10911)
    try:
        table = broker.transactions.table
        assert sorted(table.pending) == [r.queue_offset for r in results[3:]]
        assert {h.checks for h in table.pending.values()} == {1}
        assert broker.offsets.query(PROGRESS_GROUP, TRANS_HALF_TOPIC, 0) == results[3].queue_offset
        await rounds(broker, clock, 29_000)
        assert channel.checks == []  # the next check is one interval after the last one, restart or not
        await rounds(broker, clock, 1_000)
        assert sorted(c.transaction_id for c in channel.checks) == ["ID-m3", "ID-m4", "ID-m5"]
        assert [m.body for m in visible(broker)] == [b"m0", b"m2"]
    finally:
        await broker.shutdown()


async def test_find_half_by_topic_and_transaction_id(broker):
    result = await send_half(broker)
    found = broker.transactions.find_half("t", "ID-order-1")
    assert found.queue_offset == result.queue_offset
    assert broker.transactions.find_half("other", "ID-order-1") is None
    assert broker.transactions.find_half("t", "nope") is None


class FakeEscape:
    """The transaction part of a slave's escaped write path: stores (remembers) half messages, or fails as told."""

    escapes = True

    def __init__(self):
        self.escaped = []
        self.failing = False
        self.transaction = self  # the write path is this part only: the service reads nothing else
        self.name = "escaped"

    async def escape(self, half, checks, routes):
        if self.failing:
            return WriteResult.transient("ESCAPE_DISABLED", "enable_remote_escape is off")
        self.escaped.append((half.uniq_key, checks))
        return STORED


async def test_acting_escapes_every_pending_message_once_and_keeps_them_while_escape_fails(broker, clock):
    results = [await send_half(broker, f"e{i}") for i in range(4)]
    await broker.transactions.end(end_request(results[0], Commit.COMMIT))
    await rounds(broker, clock, 6_000)  # one check each of e1..e3 (nobody online)
    await broker.transactions.stop()
    escape = FakeEscape()
    escape.failing = True
    broker.write_path.use(escape)  # as ActingServices.start switches it, then starts the service
    await broker.transactions.start()
    service = broker.transactions
    await service.run_round()
    assert escape.escaped == [] and len(service.table) == 3  # kept pending, tried again later
    assert service.pacer.blocked
    escape.failing = False
    await service.run_round()
    assert escape.escaped == [("ID-e1", 1), ("ID-e2", 1), ("ID-e3", 1)]  # their checks travel with them
    assert len(service.table) == 0
    assert broker.offsets.query(PROGRESS_GROUP, TRANS_HALF_TOPIC, 0) == results[3].queue_offset + 1
    await service.run_round()
    assert len(escape.escaped) == 3
    assert broker.metrics.value("pocketmq_transaction_escapes_total") == 3


async def test_an_ending_reads_back_a_half_message_the_send_path_no_longer_holds(broker):
    first = await send_half(broker, "old")
    for i in range(1_100):  # past the send path's recent half messages
        await send_half(broker, f"n{i}")
    assert (await broker.transactions.end(end_request(first, Commit.COMMIT))).result == "COMMIT"
    assert (await broker.transactions.end(end_request(first, Commit.COMMIT, group="other"))).result == "PRODUCER_GROUP"
    assert (await broker.transactions.end(end_request(first, Commit.ROLLBACK))).result == "ALREADY_RESOLVED"
    [committed] = visible(broker)
    assert committed.body == b"old" and committed.uniq_key == "ID-old"
