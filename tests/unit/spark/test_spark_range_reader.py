"""The executor side without Spark: bulk decoding, Arrow batches, pulls in flight, data loss at read time."""

from __future__ import annotations

import concurrent.futures
import logging
import zlib

import pytest

from pocketmq.client.selector import MessageSelector
from pocketmq.common import properties as props
from pocketmq.common.message import SYSFLAG_COMPRESSED, MessageExt
from pocketmq.common.record import RecordFormatError, decode_record_columns, decode_records, encode_record
from pocketmq.common.sql_filter import compile_sql
from pocketmq.spark.clients import Pulled
from pocketmq.spark.offsets import QueueBounds, QueueId
from pocketmq.spark.planning import DataLossError, OffsetRange
from pocketmq.spark.range_reader import ROWS_PER_BATCH, ReadSettings, read_range
from pocketmq.spark.schema import records_to_batch, source_arrow_schema

QUEUE = QueueId("orders", "broker-a", 1)


def stored(queue_offset: int, *, tags: str | None = "t", uniq: bool = True, **fields) -> MessageExt:
    properties = {"n": str(queue_offset)}
    if tags:
        properties[props.TAGS] = tags
    if uniq:
        properties[props.UNIQ_KEY] = f"{queue_offset:032X}"
    return MessageExt(
        topic=QUEUE.topic,
        body=f"body-{queue_offset}".encode(),
        properties=properties,
        queue_id=QUEUE.queue_id,
        queue_offset=queue_offset,
        phys_offset=1000 + queue_offset,
        born_timestamp_ms=1_700_000_000_000,
        store_timestamp_ms=1_700_000_000_005 + queue_offset,
        store_host=("10.0.0.7", 10911),
        **fields,
    )


class FakeBroker:
    """A queue holding ``[low, high)``; pulls answer at once, 256 records at most, tags not filtered (as a
    broker whose tag hashes collide); ``pulls`` records every pull's start and count."""

    def __init__(self, low: int, high: int, tags=lambda n: "t"):
        self.low, self.high = low, high
        self.records = {n: encode_record(stored(n, tags=tags(n))) for n in range(low, high)}
        self.pulls: list[tuple[int, int]] = []

    def bounds(self, queues):
        return {q: QueueBounds(self.low, self.high) for q in queues}

    def submit_pull(self, queue, queue_offset, max_count, selector, timeout_ms):
        self.pulls.append((queue_offset, max_count))
        future: concurrent.futures.Future = concurrent.futures.Future()
        if queue_offset < self.low:
            future.set_result(Pulled("OFFSET_MOVED", self.low))
        else:
            end = min(self.high, queue_offset + min(max_count, 256))
            future.set_result(Pulled("FOUND", end, b"".join(self.records[n] for n in range(queue_offset, end))))
        return future


def settings(
    *, tags: str = "*", sql: str | None = None, fail_on_data_loss: bool = True, include_properties: bool = False
) -> ReadSettings:
    selector = MessageSelector.by_sql(sql) if sql else MessageSelector.by_tag(tags)
    return ReadSettings("127.0.0.1:9876", selector, include_properties, fail_on_data_loss, 1024, 1000)


def read_all(broker: FakeBroker, start: int, end: int, **options):
    return list(read_range(broker, OffsetRange(QUEUE, start, end), settings(**options)))  # type: ignore[arg-type]


def test_column_decoder_agrees_with_the_message_decoder():
    body = b"".join(encode_record(stored(n, tags=None if n % 2 else "t", uniq=n % 3 != 0)) for n in range(7))
    columns, messages = decode_record_columns(body), decode_records(body)
    assert len(columns) == 7
    assert list(columns.queue_offsets) == [m.queue_offset for m in messages]
    assert list(columns.phys_offsets) == [m.phys_offset for m in messages]
    assert list(columns.store_timestamps_ms) == [m.store_timestamp_ms for m in messages]
    assert columns.bodies == [m.body for m in messages]
    assert [props.decode_properties(p.decode()) for p in columns.properties] == [m.properties for m in messages]
    assert len(decode_record_columns(b"")) == 0


@pytest.mark.parametrize(
    "damage", [lambda b: b[:-1], lambda b: b[:50], lambda b: b"\0\0\0\0" + b[4:], lambda b: b[:4] + b"\0\0\0\0" + b[8:]]
)
def test_column_decoder_refuses_damaged_records(damage):
    with pytest.raises(RecordFormatError):
        decode_record_columns(damage(encode_record(stored(0))))


def test_batches_match_sparks_arrow_schema_with_every_column():
    compressed = stored(2, tags=None, uniq=False, sys_flag=SYSFLAG_COMPRESSED)
    compressed.body = zlib.compress(b"inflated")
    records = decode_record_columns(
        b"".join([encode_record(stored(0)), encode_record(stored(1, tags=None)), encode_record(compressed)])
    )
    batch = records_to_batch(QUEUE.topic, QUEUE.broker, records, include_properties=True)
    assert batch.schema == source_arrow_schema()
    rows = batch.to_pylist()
    assert [r["queue_offset"] for r in rows] == [0, 1, 2] and {r["topic"] for r in rows} == {"orders"}
    assert [r["tags"] for r in rows] == ["t", None, None]
    assert rows[0]["message_id"] == f"{0:032X}"
    assert rows[2]["message_id"] == compressed.offset_msg_id  # no UNIQ_KEY: the broker's id
    assert rows[2]["body"] == b"inflated"
    assert rows[1]["properties"] == [("n", "1")]  # user properties only
    assert rows[0]["store_timestamp"].timestamp() == 1_700_000_000.005


def test_a_range_is_read_in_large_batches_with_pulls_in_flight():
    broker = FakeBroker(0, 10_000)
    batches = read_all(broker, 10, 9_000)
    offsets = [o for b in batches for o in b.column("queue_offset").to_pylist()]
    assert offsets == list(range(10, 9_000))
    assert all(b.num_rows >= ROWS_PER_BATCH for b in batches[:-1]) and len(batches) < 9_000 // 256
    starts = [start for start, _ in broker.pulls]
    assert starts == list(range(10, 9_000, 256))  # every predicted pull was used, none twice
    assert broker.pulls[-1] == (8_970, 30)  # the last asks only for what the range still needs


def test_tags_are_filtered_exactly_when_hashes_collide():
    broker = FakeBroker(0, 600, tags=lambda n: "even" if n % 2 == 0 else "odd")
    rows = [r for b in read_all(broker, 0, 600, tags="even || none") for r in b.to_pylist()]
    assert [r["queue_offset"] for r in rows] == list(range(0, 600, 2)) and {r["tags"] for r in rows} == {"even"}


def test_offsets_retention_removed_fail_or_are_skipped_and_counted(caplog):
    broker = FakeBroker(100, 300)
    with pytest.raises(DataLossError, match=r"offset 0 .* 100 message\(s\) were removed"):
        read_all(broker, 0, 250)
    with caplog.at_level(logging.WARNING, logger="pocketmq.spark.range_reader"):
        batches = read_all(broker, 0, 250, fail_on_data_loss=False)
    assert [o for b in batches for o in b.column("queue_offset").to_pylist()] == list(range(100, 250))
    assert "event=data_loss where=read" in caplog.text and "lost=100" in caplog.text


def test_retention_running_during_a_read_is_judged_again():
    broker = FakeBroker(0, 10_000)
    reader = read_range(broker, OffsetRange(QUEUE, 0, 10_000), settings(fail_on_data_loss=False))  # type: ignore
    first = next(reader).column("queue_offset").to_pylist()
    broker.low = 6_000  # retention ran: what was not pulled yet below 6000 is gone
    read = first + [o for b in reader for o in b.column("queue_offset").to_pylist()]
    assert first == list(range(len(first))) and read == sorted(set(read))
    assert set(range(6_000, 10_000)) <= set(read) and len(read) < 10_000


class SqlFilteringBroker(FakeBroker):
    """Filters by the pull's SQL92 expression as the broker does: at most ``scan_cap`` offsets tested per pull,
    the reply's next offset past everything tested, NO_MATCHED_MSG when nothing matched."""

    def __init__(self, low: int, high: int, scan_cap: int = 2000):
        super().__init__(low, high)
        self.scan_cap = scan_cap

    def submit_pull(self, queue, queue_offset, max_count, selector, timeout_ms):
        self.pulls.append((queue_offset, max_count))
        matches = compile_sql(selector.expression).matches
        found, offset = [], queue_offset
        while offset < min(self.high, queue_offset + self.scan_cap) and len(found) < max_count:
            if matches(stored(offset).properties):
                found.append(self.records[offset])
            offset += 1
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_result(Pulled("FOUND", offset, b"".join(found)) if found else Pulled("NO_MATCHED_MSG", offset))
        return future


def test_an_sql92_read_passes_over_filtered_out_ranges_once_and_stops_at_its_end():
    broker = SqlFilteringBroker(0, 20_000)
    # Matches only 1000..1009 and 15000..: the pulls between find nothing and move on 2,000 offsets at a time.
    batches = read_all(broker, 0, 15_005, sql="n BETWEEN 1000 AND 1009 OR n >= 15000")
    assert [o for b in batches for o in b.column("queue_offset").to_pylist()] == [
        *range(1000, 1010),
        *range(15_000, 15_005),
    ]
    starts = [start for start, _ in broker.pulls]
    assert starts == sorted(set(starts))  # never the same offset twice: one pull at a time, each where the last ended
    assert starts[-1] < 15_005 <= broker.pulls[-1][0] + 2000
