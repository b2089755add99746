"""POP over the remoting protocol, as RocketMQ 5 brokers answer it, on ``broker.pop`` (the pop engine).

Requests (``extFields``), replies and bodies:

- POP_MESSAGE (200050): consumerGroup, topic, queueId (< 0: all), maxMsgNums (<= 32), invisibleTime (ms),
  pollTime (ms of long polling), bornTime (ms; ``now - bornTime - pollTime > 500`` is POLLING_TIMEOUT, the
  client gave up already), initMode (0 MIN, 1 MAX), expType (TAG or SQL92, docs/filter.md), exp, order (FIFO pop; the group's
  consumeMessageOrderly also says so), attemptId (accepted, unused). The gray split (broker/gray_split.py)
  applies to the client the connection heart-beat as: all queues means its share, a queue outside it nothing.
  Reply SUCCESS with the records back to back (RocketMQ 4.x layout; messages of the pop retry topic re-encoded
  under their own topic, FIFO ones with reconsume times = attempt - 1) and the header popTime, invisibleTime,
  reviveQid, restNum, startOffsetInfo (``retry qid startOffset`` per queue, ``;``-joined), msgOffsetInfo
  (``retry qid o1,o2,...``), orderCountInfo (FIFO: ``retry qid offset attempt-1`` per message; reviveQid 999,
  RocketMQ's orderly revive queue). A client builds
  each message's POP_CK (extraInfo) ``startOffset popTime invisibleTime reviveQid retry brokerName qid offset``
  from them. Nothing found: POLLING_TIMEOUT after long polling, PULL_NOT_FOUND without.
- ACK_MESSAGE (200051): consumerGroup, topic (the business topic), queueId, extraInfo, offset.
- BATCH_ACK_MESSAGE (200151): JSON body ``{"brokerName": ..., "acks": [{"c","t","r","so","q","rq","pt","it",
  "b"}]}`` (RocketMQ's BatchAck: ``r`` "1" for the retry topic, ``b`` the bit set of acked ``offset - so``, as a
  base64 ``BitSet.toByteArray`` or a list of ``toLongArray`` words). Reply SUCCESS with the body
  ``{"failed": [[entry index, offset, code, remark], ...]}``: the acks refused (stale or unknown handles), which
  RocketMQ skips silently and PocketMQ's client reports per message.
- CHANGE_MESSAGE_INVISIBLETIME (200053): the ACK fields plus invisibleTime; reply popTime, invisibleTime,
  reviveQid: the new extraInfo is ``offset popTime invisibleTime reviveQid retry brokerName qid offset``.

A handle that is garbage, stale or another broker's is INVALID_PARAMETER with a remark (the v2 front end
says INVALID_RECEIPT_HANDLE).
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

from pocketmq.broker.pop.checkpoint import MAX_MESSAGES_PER_CK
from pocketmq.broker.pop.fifo import ORDERLY_REVIVE_QUEUE_ID
from pocketmq.broker.pop.receipt import InvalidReceiptHandle, ReceiptHandle
from pocketmq.broker.pop.receive import PopRequest, PopResult
from pocketmq.common.errors import (
    BadRequestError,
    InvalidReceiptHandleError,
    LimitExceededError,
)
from pocketmq.common.record import encode_record
from pocketmq.common.topic import RETRY_GROUP_TOPIC_PREFIX, pop_retry_topic
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import response_code_of
from pocketmq.protocol.limits import BATCH_ACK_BITS
from pocketmq.protocol.remoting_headers import json_body
from pocketmq.protocol.request_headers import AckMessageRequestHeader
from pocketmq.protocol.transport import RemotingConnection, RequestRouter
from pocketmq.server.broker_headers import BrokerChangeInvisibleTimeHeader, BrokerPopMessageHeader

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


POLL_LATE_TOLERANCE_MS = 500
_WORD_MASK = 2**64 - 1


def extra_info(result: PopResult, retry: bool, queue_id: int, start_offset: int, queue_offset: int) -> str:
    """RocketMQ's extraInfo (the POP_CK property) of one popped message."""
    return (
        f"{start_offset} {result.pop_time_ms} {result.invisible_ms} {result.revive_queue_id} {int(retry)} "
        f"{result.broker_name} {queue_id} {queue_offset}"
    )


def handle_from_extra_info(group: str, topic: str, extra: str, queue_offset: int | None = None) -> ReceiptHandle:
    """A ReceiptHandle from the extraInfo of an ACK / CHANGE request; InvalidReceiptHandleError if garbage."""
    parts = extra.split(" ")
    try:
        if len(parts) not in (7, 8):
            raise ValueError(f"extraInfo has {len(parts)} fields, not 7 or 8")
        start, pop_time, invisible, revive_qid, retry = (int(p) for p in parts[:5])
        queue_id = int(parts[6])
        offset = int(parts[7]) if len(parts) == 8 else queue_offset
        if offset is None:
            raise ValueError("no message offset")
        actual = pop_retry_topic(group, topic) if retry and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else topic
        return ReceiptHandle.decode(
            " ".join(
                str(v)
                for v in (
                    actual,
                    start,
                    pop_time,
                    invisible,
                    revive_qid,
                    1 if retry else 0,
                    parts[5],
                    queue_id,
                    offset,
                    0,
                )
            )
        )
    except (ValueError, InvalidReceiptHandle) as exc:
        raise InvalidReceiptHandleError(f"extraInfo {extra!r}: {exc}") from None


def bit_set(value) -> int:
    """RocketMQ's serialized java.util.BitSet: base64 of toByteArray(), or a list of toLongArray() words."""
    if isinstance(value, str):
        return int.from_bytes(base64.b64decode(value), "little")
    if isinstance(value, list):  # the words as bytes, then one int: linear, where summing shifted ints is not
        return int.from_bytes(b"".join((int(word) & _WORD_MASK).to_bytes(8, "little") for word in value), "little")
    raise ValueError("bit set is neither base64 nor a list of words")


def set_bit_indexes(bits: int) -> list[int]:
    """The indexes of the set bits of ``bits``, lowest first; BadRequestError when more than one CK holds.

    An ack entry names messages of one CK (at most MAX_MESSAGES_PER_CK), so more set bits are a client's mistake;
    counting them first keeps the walk to that many steps of big-int work, whatever the bit set's length.
    """
    if bits < 0:
        raise BadRequestError("batch ack bit set is negative")
    if bits.bit_count() > MAX_MESSAGES_PER_CK:
        raise LimitExceededError(
            BATCH_ACK_BITS,
            f"batch ack entry acks {bits.bit_count()} messages, more than a pop hands out ({MAX_MESSAGES_PER_CK})",
        )
    indexes = []
    while bits:
        lowest = bits & -bits
        indexes.append(lowest.bit_length() - 1)
        bits ^= lowest
    return indexes


class PopHandlers:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def register(self, router: RequestRouter) -> None:
        router.register(RequestCode.POP_MESSAGE, self.pop_message)
        router.register(RequestCode.ACK_MESSAGE, self.ack_message)
        router.register(RequestCode.BATCH_ACK_MESSAGE, self.batch_ack_message)
        router.register(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, self.change_invisible_time)

    async def pop_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = BrokerPopMessageHeader.parse(request.ext_fields)
        group, poll_ms, born_ms = h.consumer_group, h.poll_time_ms, h.born_time_ms
        broker = self._broker
        if born_ms > 0 and broker.clock.now_ms() - born_ms - poll_ms > POLL_LATE_TOLERANCE_MS:
            return request.response(ResponseCode.POLLING_TIMEOUT, remark="the pop arrived after its poll time")
        read_filter = broker.filters.read_filter(h.exp_type, h.exp)
        fifo = True if h.order else None
        result = await broker.pop.pop(
            PopRequest(
                group,
                h.topic,
                h.max_msg_nums,
                h.invisible_time_ms,
                queue_id=h.queue_id,
                read_filter=read_filter,
                poll_ms=poll_ms,
                init_mode=h.init_mode,
                fifo=fifo,
                client_id=broker.consumers.client_id_on(group, conn),
            )
        )
        # A FIFO pop's handles name RocketMQ's orderly revive queue (999), so its acks find the FIFO state.
        fifo_pop = any(popped.attempts is not None for popped in result.queues)
        header: dict[str, int | str] = {
            "popTime": result.pop_time_ms,
            "invisibleTime": result.invisible_ms,
            "reviveQid": ORDERLY_REVIVE_QUEUE_ID if fifo_pop else result.revive_queue_id,
            "restNum": result.rest_num,
        }
        if not result.queues:
            code = ResponseCode.POLLING_TIMEOUT if poll_ms > 0 else ResponseCode.PULL_NOT_FOUND
            return request.response(code, header, remark="no new message")
        start_info, offset_info, order_info, body = [], [], [], []
        for popped in result.queues:
            retry = int(popped.retry)
            offsets = popped.queue_offsets
            start_info.append(f"{retry} {popped.queue_id} {popped.start_offset}")
            offset_info.append(f"{retry} {popped.queue_id} {','.join(map(str, offsets))}")
            if popped.attempts is not None:
                order_info += [f"{retry} {popped.queue_id} {o} {a - 1}" for o, a in zip(offsets, popped.attempts)]
            if popped.as_stored:
                body += popped.records
            else:
                body += [encode_record(m) for m in popped.messages()]
        header.update(startOffsetInfo=";".join(start_info), msgOffsetInfo=";".join(offset_info))
        if order_info:
            header["orderCountInfo"] = ";".join(order_info)
        return request.response(ResponseCode.SUCCESS, header, body=b"".join(body))

    @staticmethod
    def _handle(h: AckMessageRequestHeader) -> ReceiptHandle:
        return handle_from_extra_info(h.consumer_group, h.topic, h.extra_info, h.offset)

    async def ack_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = AckMessageRequestHeader.parse(request.ext_fields)
        [error] = await self._broker.pop.ack(h.consumer_group, [self._handle(h)])
        if error is not None:
            raise error
        return request.response(ResponseCode.SUCCESS)

    async def batch_ack_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        body = json_body(request.body, "batch ack")
        acks = body.get("acks") if isinstance(body, dict) else None
        if not isinstance(acks, list):
            raise BadRequestError("batch ack body lacks its acks list")
        broker_name = str(body.get("brokerName") or self._broker.broker_name)
        by_group: dict[str, tuple[list[ReceiptHandle], list[tuple[int, int]]]] = {}
        for entry_index, ack in enumerate(acks):
            try:
                group, topic = str(ack["c"]), str(ack["t"])
                retry = str(ack.get("r", "0")) not in ("0", "", "None")
                start, bits = int(ack["so"]), bit_set(ack["b"])
                prefix = " ".join(
                    str(v)
                    for v in (
                        start,
                        int(ack["pt"]),
                        int(ack["it"]),
                        int(ack["rq"]),
                        int(retry),
                        broker_name,
                        int(ack["q"]),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise BadRequestError(f"batch ack entry {ack!r}: {exc}") from None
            offsets = [start + i for i in set_bit_indexes(bits)]
            if not offsets:
                continue
            # The entry is checked once, as the handle of its first offset; the others differ by offset only.
            first = handle_from_extra_info(group, topic, f"{prefix} {offsets[0]}")
            handles, positions = by_group.setdefault(group, ([], []))
            handles.extend(first.at_offset(o) for o in offsets)
            positions.extend((entry_index, o) for o in offsets)
        # RocketMQ skips the stale entries of a batch and answers SUCCESS; the body also lists each refused ack
        # (entry index, offset, code, remark), which PocketMQ's client reads to fail that ack alone.
        failed = []
        for group, (handles, positions) in by_group.items():
            for (entry_index, offset), error in zip(positions, await self._broker.pop.ack(group, handles), strict=True):
                if error is not None:
                    failed.append([entry_index, offset, response_code_of(error), str(error)])
        return request.response(ResponseCode.SUCCESS, body=json.dumps({"failed": failed}).encode())

    async def change_invisible_time(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = BrokerChangeInvisibleTimeHeader.parse(request.ext_fields)
        new = await self._broker.pop.change_invisible(h.consumer_group, self._handle(h), h.invisible_time_ms)
        return request.response(
            ResponseCode.SUCCESS,
            {"popTime": new.pop_time_ms, "invisibleTime": new.invisible_time_ms, "reviveQid": new.revive_queue_id},
        )
