"""A message's trace, read back: the records of ``RMQ_SYS_TRACE_TOPIC`` about one message id, as steps in order
(``pocketmq message trace``, docs/trace.md).

Both brokers and tracing clients key each trace message by the message ids of its records, so the brokers' key
index finds them all. The records are ordered by time; a message's records from one writer keep the order they
were written in when their times are equal. A send after a dead letter is shown as ``resend``: it is the
message sent again from its dead-letter queue.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.client.message_lookup import MessageLookup
from pocketmq.common.errors import BadRequestError, ClientError
from pocketmq.common.trace_record import (
    BROKER_STEP,
    END_TRANSACTION,
    PUB,
    SUB_AFTER,
    SUB_BEFORE,
    TRACE_TOPIC,
    TraceRecord,
    decode_records,
)

MAX_TRACE_MESSAGES = 256
# What the 4.x clients' records are called among the broker's steps.
CLIENT_STEPS = {
    PUB: "client_send",
    SUB_BEFORE: "client_consume",
    SUB_AFTER: "client_consumed",
    END_TRANSACTION: "client_end_transaction",
}


@dataclass(frozen=True, slots=True)
class TraceStep:
    step: str
    timestamp_ms: int
    actor: str
    source: str  # the broker that recorded it, or "client" for a client's record
    record: TraceRecord

    def to_json(self) -> dict:
        r = self.record
        out = {
            "step": self.step,
            "time_ms": self.timestamp_ms,
            "actor": self.actor,
            "source": self.source,
            "message_id": r.msg_id,
            "topic": r.topic or None,
        }
        if r.type == BROKER_STEP:
            out.update(queue_id=r.queue_id, queue_offset=r.queue_offset, details=r.details)
        else:
            out["details"] = _client_details(r)
        return out


def _client_details(r: TraceRecord) -> dict:
    if r.type == PUB:
        return {"success": r.success, "cost_ms": r.cost_ms, "store_host": r.store_host, "tags": r.tags}
    if r.type == SUB_BEFORE:
        return {"retry_times": r.retry_times, "request_id": r.request_id}
    if r.type == SUB_AFTER:
        return {"success": r.success, "cost_ms": r.cost_ms, "request_id": r.request_id}
    return {"transaction_id": r.transaction_id, "state": r.transaction_state, "from_check": r.from_check}


def trace_steps(records: list[TraceRecord]) -> list[TraceStep]:
    """``records`` (in the order they were stored) as steps in time order."""
    ordered = sorted(records, key=lambda r: r.timestamp_ms)  # stable: equal times keep the stored order
    steps = []
    dead = False
    for r in ordered:
        if r.type == BROKER_STEP:
            step = "resend" if r.step == "send" and dead else r.step
            dead = dead or r.step == "dlq"
            steps.append(TraceStep(step, r.timestamp_ms, r.actor, r.broker, r))
        else:
            actor = r.group if r.type != SUB_AFTER else ""
            steps.append(TraceStep(CLIENT_STEPS[r.type], r.timestamp_ms, actor or r.client_host, "client", r))
    return steps


async def message_trace(lookup: MessageLookup, msg_id: str) -> list[TraceStep]:
    """The trace of the message ``msg_id`` (the producer's id; an offset message id is first read to learn it)."""
    records = await _records_about(lookup, msg_id)
    if not records:
        try:
            found = await lookup.by_id(msg_id)
        except (BadRequestError, ClientError):  # not an offset message id this cluster knows: no trace of it
            return []
        ids = {f.message.msg_id for f in found} - {msg_id}
        for uniq in ids:
            records += await _records_about(lookup, uniq)
    return trace_steps(records)


async def _records_about(lookup: MessageLookup, msg_id: str) -> list[TraceRecord]:
    found = await lookup.by_key(TRACE_TOPIC, msg_id, max_messages=MAX_TRACE_MESSAGES)
    return [
        r for f in found for r in decode_records(f.message.body.decode("utf-8", errors="replace")) if r.msg_id == msg_id
    ]
