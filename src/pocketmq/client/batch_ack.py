"""Batch acks of the simple consumer: BATCH_ACK_MESSAGE bodies, and the acks of one event-loop turn sent as one.

A body (RocketMQ's BatchAck) holds one entry per checkpoint (topic, retry flag, start offset, queue, revive
queue, pop time, invisible time) with the bit set of the acked offsets above its start: the messages of one
received batch share an entry.

``AckCoalescer`` serves ``AsyncSimpleConsumer.ack``. A consumer that acks each message of a batch without
waiting for the ack before the next (``asyncio.ensure_future(consumer.ack(m))``, a task per message) would send
one request per message, and each request costs the broker far more than the ack itself. The acks asked for in
one turn of the event loop are sent in the next turn: one alone as ACK_MESSAGE, as before; several as one
BATCH_ACK_MESSAGE per broker. Each ``ack`` still returns only once the broker has taken *its* ack, and fails
with the error the single ACK_MESSAGE would have given: a PocketMQ broker lists the acks of a batch it refused
(a stale or unknown receipt handle) in the reply's body, ``{"failed": [[entry, offset, code, remark], ...]}``,
and a batch refused as a whole (nothing of it acked) is sent again one ack at a time. A RocketMQ broker sends no
such list: it skips a stale handle of a batch as it skips a stale single ack.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pocketmq.common import properties as props
from pocketmq.common.errors import ClientError
from pocketmq.common.message import MessageExt
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.protocol.replies import reply_error

BROKER_NAME_PROPERTY = "PMQ_BROKER_NAME"


def pop_ck(msg: MessageExt) -> tuple[str, str]:
    """A received message's extraInfo (its receipt handle) and the name of the broker that handed it out."""
    extra = msg.properties.get(props.POP_CK)
    broker = msg.properties.get(BROKER_NAME_PROPERTY)
    if not extra or not broker:
        raise ClientError("the message was not received by a simple consumer (no POP_CK)")
    return extra, broker


@dataclass
class BatchAckRequest:
    """The BATCH_ACK_MESSAGE of one broker; the indexes of its messages in the list acked, and where each one's
    ack is in the request: (entry index, offset), in the same order."""

    request: RemotingCommand
    message_indexes: list[int] = field(default_factory=list)
    positions: list[tuple[int, int]] = field(default_factory=list)


def batch_ack_requests(
    messages: list[MessageExt], group: str, wrap_topic: Callable[[str], str]
) -> dict[str, BatchAckRequest]:
    """Broker name -> the request acking the ``messages`` of that broker. ValueError (or ClientError) when a
    message's receipt handle does not parse."""
    entries_by_broker: dict[str, dict[tuple, int]] = {}
    positions_by_broker: dict[str, list[tuple[int, tuple, int]]] = {}
    for message_index, msg in enumerate(messages):
        extra, broker = pop_ck(msg)
        start, pop_time, invisible, revive_qid, retry, _, queue_id, offset = extra.split(" ")
        key = (wrap_topic(msg.topic), retry, int(start), int(queue_id), int(revive_qid), int(pop_time), int(invisible))
        bit = int(offset) - key[2]
        if bit < 0:
            raise ValueError(f"offset {offset} below the handle's start {start}")
        entries = entries_by_broker.setdefault(broker, {})
        entries[key] = entries.get(key, 0) | 1 << bit
        positions_by_broker.setdefault(broker, []).append((message_index, key, int(offset)))
    requests = {}
    for broker, entries in entries_by_broker.items():
        index = {key: i for i, key in enumerate(entries)}
        acks = [
            {
                "c": group,
                "t": t,
                "r": r,
                "so": so,
                "q": q,
                "rq": rq,
                "pt": pt,
                "it": it,
                "b": base64.b64encode(bits.to_bytes((bits.bit_length() + 7) // 8, "little")).decode(),
            }
            for (t, r, so, q, rq, pt, it), bits in entries.items()
        ]
        body = json.dumps({"brokerName": broker, "acks": acks}, separators=(",", ":")).encode()
        positions = positions_by_broker[broker]
        requests[broker] = BatchAckRequest(
            RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, body=body),
            [message_index for message_index, _, _ in positions],
            [(index[key], offset) for _, key, offset in positions],
        )
    return requests


def failed_acks(reply: RemotingCommand) -> dict[tuple[int, int], RemoteServerError]:
    """(entry index, offset) -> the error of each ack a SUCCESS batch reply lists as refused (none from a broker
    that does not list them)."""
    if not reply.body:
        return {}
    try:
        failed = json.loads(reply.body).get("failed") or []
        return {
            (int(entry), int(offset)): RemoteServerError(int(code), str(remark))
            for entry, offset, code, remark in failed
        }
    except (ValueError, TypeError, AttributeError):
        return {}  # not PocketMQ's list: nothing to read from it


Invoke = Callable[[str, RemotingCommand], Awaitable[RemotingCommand]]


class AckCoalescer:
    """The acks of one event-loop turn, sent together in the next (see the module's doc).

    ``invoke(broker_name, request)`` sends a request to a broker; ``ack_one(msg)`` is the single ACK_MESSAGE.
    """

    def __init__(self, group: str, wrap_topic: Callable[[str], str], invoke: Invoke, ack_one):
        self._group = group
        self._wrap_topic = wrap_topic
        self._invoke = invoke
        self._ack_one = ack_one
        self._pending: list[tuple[MessageExt, asyncio.Future]] = []
        self._sending: set[asyncio.Task] = set()  # held, so a send under way is not collected

    async def ack(self, msg: MessageExt) -> None:
        loop = asyncio.get_running_loop()
        if not self._pending:
            loop.call_soon(self._flush)
        done = loop.create_future()
        self._pending.append((msg, done))
        await done

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._send(pending))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, pending: list[tuple[MessageExt, asyncio.Future]]) -> None:
        if len(pending) == 1:
            await self._settle_alone(*pending[0])
            return
        try:
            requests = batch_ack_requests([msg for msg, _ in pending], self._group, self._wrap_topic)
        except (ValueError, ClientError):  # a handle that does not parse: each ack alone gets its own answer
            await asyncio.gather(*(self._settle_alone(msg, done) for msg, done in pending))
            return
        await asyncio.gather(
            *(
                self._send_batch(broker, batch, [pending[i] for i in batch.message_indexes])
                for broker, batch in requests.items()
            )
        )

    async def _send_batch(
        self, broker: str, batch: BatchAckRequest, acks: list[tuple[MessageExt, asyncio.Future]]
    ) -> None:
        try:
            reply = await self._invoke(broker, batch.request)
        except BaseException as exc:
            for _, done in acks:
                _settle(done, exc)
            if not isinstance(exc, Exception):
                raise
            return
        if reply.code == ResponseCode.INVALID_PARAMETER:  # refused whole, nothing acked: each alone
            await asyncio.gather(*(self._settle_alone(msg, done) for msg, done in acks))
            return
        if reply.code != ResponseCode.SUCCESS:
            for _, done in acks:
                _settle(done, reply_error(reply))
            return
        failed = failed_acks(reply)
        for (_, done), position in zip(acks, batch.positions, strict=True):
            _settle(done, failed.get(position))

    async def _settle_alone(self, msg: MessageExt, done: asyncio.Future) -> None:
        try:
            await self._ack_one(msg)
        except Exception as exc:
            _settle(done, exc)
        else:
            _settle(done, None)


def _settle(done: asyncio.Future, error: BaseException | None) -> None:
    if done.done():  # the acker was cancelled
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
