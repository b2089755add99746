"""The broker's tracer (broker/tracer.py) and trace writer (broker/trace_writer.py): sampling by message id,
positions remembered from pops, a bounded queue that drops and counts, batches keyed by message id."""

from __future__ import annotations

import asyncio

from pocketmq.broker.pop.checkpoint import PopCheckpoint
from pocketmq.broker.pop.copies import DLQ_REASON
from pocketmq.broker.pop.revive import Copy
from pocketmq.broker.pop.rewrite import Rewrite
from pocketmq.broker.trace_writer import RECORDS_PER_SEND, TraceWriter
from pocketmq.broker.tracer import Tracer, record_uniq_key, sampled
from pocketmq.common.message import MessageExt
from pocketmq.common.record import encode_record
from pocketmq.common.trace_record import (
    BROKER_STEP,
    RECORDS_PER_MESSAGE,
    TRACE_TOPIC,
    TraceRecord,
    decode_records,
    trace_messages,
)
from pocketmq.metrics import MetricsRegistry
from pocketmq.runtime.clock import ManualClock
from pocketmq.testing.polling import eventually


def test_sampling_is_a_function_of_the_message_id():
    ids = [f"ID{i:05d}" for i in range(10_000)]
    assert all(sampled(i, 1.0) for i in ids) and not any(sampled(i, 0.0) for i in ids)
    tenth = [i for i in ids if sampled(i, 0.1)]
    assert 800 < len(tenth) < 1200
    assert tenth == [i for i in ids if sampled(i, 0.1)]  # the same answer every time, on every broker
    assert set(tenth) <= {i for i in ids if sampled(i, 0.5)}  # a larger ratio traces a superset


def record(msg_id: str) -> TraceRecord:
    return TraceRecord(BROKER_STEP, msg_id, 1, broker="b", step="send", actor="p")


def test_a_full_queue_drops_and_counts_and_offer_never_waits():
    metrics = MetricsRegistry()
    sent: list = []

    async def send(messages):
        sent.append(messages)

    writer = TraceWriter(send, capacity=3, metrics=metrics)
    writer.offer([record("a"), record("b")])
    writer.offer([record("c"), record("d")])
    assert writer.queued == 3
    assert metrics.value("pocketmq_trace_records_dropped_total") == 1
    asyncio.run(writer.write_queued())
    [[message]] = sent
    assert message.topic == TRACE_TOPIC and message.keys == ["a", "b", "c"]
    assert [r.msg_id for r in decode_records(message.body.decode())] == ["a", "b", "c"]


def test_a_failed_write_drops_the_batch_and_the_writer_goes_on():
    metrics = MetricsRegistry()

    async def send(messages):
        raise OSError("disk full")

    writer = TraceWriter(send, capacity=10, metrics=metrics)
    writer.offer([record("a")])
    asyncio.run(writer.write_queued())
    assert writer.queued == 0 and metrics.value("pocketmq_trace_records_dropped_total") == 1


def test_records_are_packed_a_few_per_message():
    records = [record(f"m{i}") for i in range(RECORDS_PER_MESSAGE + 1)]
    first, second = trace_messages(records)
    assert len(first.keys) == RECORDS_PER_MESSAGE and second.keys == [f"m{RECORDS_PER_MESSAGE}"]


class Handle:  # what the tracer reads of a receipt handle
    def __init__(self, topic: str, queue_id: int, queue_offset: int):
        self.topic, self.queue_id, self.queue_offset = topic, queue_id, queue_offset


def test_an_ack_is_traced_only_at_a_position_seen_popped_and_ends_it():
    offered: list[TraceRecord] = []

    class Writer:
        def offer(self, records):
            offered.extend(records)

    enabled = [True]
    tracer = Tracer(Writer(), broker_name="b", clock=ManualClock(), settings=lambda: (enabled[0], 1.0))  # type: ignore[arg-type]
    tracer._remember(("g", "t", 0, 5), "MSG")
    tracer.acked("g", [Handle("t", 0, 6), Handle("t", 0, 5)], [None, None])  # type: ignore[list-item]
    tracer.acked("g", [Handle("t", 0, 5)], [None])  # type: ignore[list-item]
    assert [(r.step, r.msg_id, r.queue_offset, r.actor) for r in offered] == [("ack", "MSG", 5, "g")]
    enabled[0] = False  # a broker that stopped tracing records no send
    tracer.sent([], [])
    assert len(offered) == 1


def test_a_popped_records_message_id_is_read_from_its_properties_alone():
    def stored(properties: dict[str, str]) -> bytes:
        body = b"UNIQ_KEY\x01not-this\x02" * 2  # a body that looks like properties is still a body
        return encode_record(MessageExt(topic="orders", body=body, properties=properties))

    assert record_uniq_key(stored({"KEYS": "k", "UNIQ_KEY": "ID1"})) == "ID1"
    assert record_uniq_key(stored({"MY_UNIQ_KEY": "no", "UNIQ_KEY": "ID2"})) == "ID2"
    assert record_uniq_key(stored({"MY_UNIQ_KEY": "no"})) is None
    assert record_uniq_key(stored({})) is None
    assert record_uniq_key(stored({"UNIQ_KEY": "ID3", "TAGS": "t"})) == "ID3"  # the first entry, and ended by \x02
    assert record_uniq_key(stored({"UNIQ_KEY": "\u00e9t\u00e9"})) == "\u00e9t\u00e9"
    # entries decode_properties would skip (a value holding the name separator) are skipped here too
    assert record_uniq_key(stored({"UNIQ_KEY": "bad\x01value"})) is None


def test_records_offered_within_an_interval_go_out_in_one_send_and_a_full_send_at_once():
    sends: list[list] = []

    async def send(messages):
        sends.append(messages)

    async def scenario():
        writer = TraceWriter(send, capacity=10_000, write_interval_s=60)
        writer.start()
        writer.offer([record(f"n{i}") for i in range(RECORDS_PER_SEND)])  # a whole send's worth: not held
        await eventually(lambda: sends or None, 5, "the full send written before its interval ended")
        for i in range(5):  # five steps, each its own offer, the writer free to run between them
            writer.offer([record(f"m{i}")])
            await asyncio.sleep(0)
        assert len(sends) == 1  # held for the interval
        await writer.stop()  # writes what it held: the five in one send

    asyncio.run(scenario())
    assert sum(len(m.keys) for m in sends[0]) == RECORDS_PER_SEND
    assert [m.keys for m in sends[1]] == [[f"m{i}" for i in range(5)]]


def test_revive_traces_rewrites_with_the_read_reason_then_the_copies_and_forgets_the_positions():
    offered: list[TraceRecord] = []

    class Writer:
        def offer(self, records):
            offered.extend(records)

    tracer = Tracer(Writer(), broker_name="b", clock=ManualClock(), settings=lambda: (True, 1.0))  # type: ignore[arg-type]
    for offset, msg_id in ((7, "M7"), (8, "M8"), (9, "M9")):
        tracer._remember(("g", "t", 1, offset), msg_id)
    ck = PopCheckpoint.of_offsets("t", "g", 1, [7, 8, 9], 1_000, 300, "other-broker")
    rewrite = Rewrite(PopCheckpoint.of_offsets("t", "g", 1, [8], 1_300, 300, "other-broker"), wait_ms=500)
    tracer.revived(ck, [], [(rewrite, "TIMEOUT")], [], [])
    retry = MessageExt(topic="%RETRY%g_t", body=b"", reconsume_times=1)
    dead = MessageExt(topic="%DLQ%g", body=b"", properties={DLQ_REASON: "MAX_ATTEMPTS"})
    tracer.revived(ck, [Copy(retry, False, queue_offset=7), Copy(dead, True, queue_offset=9)], [], [(8, "gone")], [])
    steps = [(r.step, r.msg_id, r.details.get("reason"), r.details["read"]) for r in offered]
    assert steps == [
        ("ck_rewrite", "M8", "TIMEOUT", "remote:other-broker"),
        ("retry", "M7", None, "remote:other-broker"),
        ("dlq", "M9", "MAX_ATTEMPTS", "remote:other-broker"),
        ("gone", "M8", "gone", "remote:other-broker"),
    ]
    assert offered[1].details["to_topic"] == "%RETRY%g_t" and offered[0].details["wait_ms"] == 500
    tracer.revived(ck, [Copy(retry, False, queue_offset=7)], [], [], [])  # a position ends once
    assert len(offered) == 4
