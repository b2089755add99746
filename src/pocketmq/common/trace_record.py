"""Message trace records: RocketMQ 4.x's trace data, and the broker's own steps, in one text format.

A trace message (topic ``RMQ_SYS_TRACE_TOPIC``) carries a body of records; each record ends with FIELD_SPLITOR
(char 2) and its fields are separated by CONTENT_SPLITOR (char 1). Its KEYS are the message ids the records
are about, so the brokers' key index finds every record of one message (docs/trace.md).

The 4.x client types, field by field (their order is the format):

- ``Pub``: time, region, producer group, topic, message id, tags, keys, store host, body length, cost ms,
  message type (ordinal), offset message id, success; older clients leave out the offset id, newer ones add
  the client host;
- ``SubBefore``: time, region, consumer group, request id, message id, retry times, keys;
- ``SubAfter``: request id, message id, cost ms, success, keys, context code, time (the last two optional);
- ``EndTransaction``: time, region, producer group, topic, message id, tags, keys, store host, message type,
  transaction id, transaction state, from a transaction check.

PocketMQ adds ``PmqStep``, a step of a message's life seen by a broker: time, broker, step, actor, message id,
topic, queue id, queue offset, details (a JSON object). A record of an unknown type is skipped, as 4.x
clients skip ours.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pocketmq.common.message import Message

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
DEFAULT_REGION = "DefaultRegion"
RECORDS_PER_MESSAGE = 16  # a message's keys index every record's message id: few per message keeps keys short

PUB = "Pub"
SUB_BEFORE = "SubBefore"
SUB_AFTER = "SubAfter"
END_TRANSACTION = "EndTransaction"
BROKER_STEP = "PmqStep"


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One record; the fields its type has not are left at their defaults."""

    type: str
    msg_id: str
    timestamp_ms: int = 0
    region: str = DEFAULT_REGION
    group: str = ""  # producer or consumer group
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    body_length: int = 0
    cost_ms: int = 0
    msg_type: int = 0  # RocketMQ's MessageType ordinal: 0 normal, 1 transaction half, 2 transaction commit, 3 delay
    offset_msg_id: str = ""
    success: bool = True
    client_host: str = ""
    request_id: str = ""
    retry_times: int = 0
    context_code: int = 0
    transaction_id: str = ""
    transaction_state: str = ""
    from_check: bool = False
    broker: str = ""  # PmqStep: the broker that saw the step
    step: str = ""  # PmqStep: what happened (docs/trace.md lists the steps)
    actor: str = ""  # PmqStep: who did it: a client id or address, a group, or the broker's revive
    queue_id: int = -1
    queue_offset: int = -1
    details: dict = field(default_factory=dict)


def _text(value) -> str:
    """A field as 4.x writes it: Java prints a missing string as ``null`` and booleans in lower case."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _fields(record: TraceRecord) -> list:
    r = record
    if r.type == PUB:
        return [r.timestamp_ms, r.region, r.group, r.topic, r.msg_id, r.tags, r.keys, r.store_host, r.body_length,
                r.cost_ms, r.msg_type, r.offset_msg_id, r.success, r.client_host]  # fmt: skip
    if r.type == SUB_BEFORE:
        return [r.timestamp_ms, r.region, r.group, r.request_id, r.msg_id, r.retry_times, r.keys]
    if r.type == SUB_AFTER:
        return [r.request_id, r.msg_id, r.cost_ms, r.success, r.keys, r.context_code, r.timestamp_ms]
    if r.type == END_TRANSACTION:
        return [r.timestamp_ms, r.region, r.group, r.topic, r.msg_id, r.tags, r.keys, r.store_host, r.msg_type,
                r.transaction_id, r.transaction_state, r.from_check]  # fmt: skip
    if r.type == BROKER_STEP:
        details = json.dumps(r.details, separators=(",", ":"), sort_keys=True)  # escapes chars 1 and 2
        return [r.timestamp_ms, r.broker, r.step, r.actor, r.msg_id, r.topic, r.queue_id, r.queue_offset, details]
    raise ValueError(f"unknown trace record type {r.type!r}")


def encode_records(records: list[TraceRecord]) -> str:
    """The body of one trace message holding ``records``."""
    return "".join(CONTENT_SPLITOR.join([r.type, *(_text(v) for v in _fields(r))]) + FIELD_SPLITOR for r in records)


def _bool(text: str) -> bool:
    return text.lower() == "true"  # Java's Boolean.parseBoolean


def _decode_pub(f: list[str]) -> TraceRecord:
    offset_msg_id, success, client_host = "", True, ""
    if len(f) == 13:
        success = _bool(f[12])
    elif len(f) >= 14:
        offset_msg_id, success = f[12], _bool(f[13])
        client_host = f[14] if len(f) >= 15 else ""
    return TraceRecord(PUB, f[5], int(f[1]), f[2], f[3], f[4], f[6], f[7], f[8], int(f[9]), int(f[10]), int(f[11]),
                       offset_msg_id, success, client_host)  # fmt: skip


def _decode_one(f: list[str]) -> TraceRecord | None:
    kind = f[0]
    if kind == PUB:
        return _decode_pub(f)
    if kind == SUB_BEFORE:
        return TraceRecord(SUB_BEFORE, f[5], int(f[1]), f[2], f[3], keys=f[7], request_id=f[4], retry_times=int(f[6]))
    if kind == SUB_AFTER:
        return TraceRecord(
            SUB_AFTER,
            f[2],
            int(f[7]) if len(f) >= 8 else 0,
            keys=f[5],
            cost_ms=int(f[3]),
            success=_bool(f[4]),
            request_id=f[1],
            context_code=int(f[6]) if len(f) >= 7 else 0,
        )
    if kind == END_TRANSACTION:
        return TraceRecord(END_TRANSACTION, f[5], int(f[1]), f[2], f[3], f[4], f[6], f[7], f[8], msg_type=int(f[9]),
                           transaction_id=f[10], transaction_state=f[11], from_check=_bool(f[12]))  # fmt: skip
    if kind == BROKER_STEP:
        return TraceRecord(BROKER_STEP, f[5], int(f[1]), topic=f[6], broker=f[2], step=f[3], actor=f[4],
                           queue_id=int(f[7]), queue_offset=int(f[8]), details=json.loads(f[9]))  # fmt: skip
    return None


def decode_records(body: str) -> list[TraceRecord]:
    """The records of a trace message's body; records of unknown types and malformed ones are skipped (a trace
    topic is written by any client)."""
    records = []
    for text in body.split(FIELD_SPLITOR):
        if not text:
            continue
        try:
            record = _decode_one(text.split(CONTENT_SPLITOR))
        except (IndexError, ValueError):
            continue
        if record is not None:
            records.append(record)
    return records


def record_keys(records: list[TraceRecord]) -> list[str]:
    """The KEYS of a trace message: each record's message id and keys, once each, in order."""
    keys: dict[str, None] = {}
    for r in records:
        for key in (r.msg_id, *r.keys.split()):
            if key and key != "null":
                keys[key] = None
    return list(keys)


def trace_messages(records: list[TraceRecord]) -> list[Message]:
    """``records`` packed into trace messages of at most ``RECORDS_PER_MESSAGE`` each, in order."""
    messages = []
    for start in range(0, len(records), RECORDS_PER_MESSAGE):
        chunk = records[start : start + RECORDS_PER_MESSAGE]
        messages.append(Message.create(TRACE_TOPIC, encode_records(chunk), keys=record_keys(chunk)))
    return messages
