"""The v2 consumer RPCs over the pop engine (``broker.pop``): ReceiveMessage, AckMessage,
ChangeInvisibleDuration, QueryAssignment, ForwardMessageToDeadLetterQueue.

- ReceiveMessage long-polls until messages arrive or ``min(long_polling_timeout (default 20 s), the client's
  deadline - 500 ms)``, so the answer always beats the client's deadline, or until its client's session ends
  (NotifyClientTermination answers after the client's long polls did, before the client closes its channel); the batch is clamped to [1, 32]; the
  queue id is ignored (any queue of the topic, as RocketMQ's proxy pops a topic) except for push consumers
  (``auto_renew``) of FIFO groups, which get one assignment per queue and receive on each. A simple consumer of
  a FIFO group names the queue its route rotation picked, and gets messages of any ready queue. The
  invisible time is the request's (auto-renewing push consumers send none: 60 s), at least the broker's
  ``pop_min_invisible_ms`` and at most 12 h (``ILLEGAL_INVISIBLE_TIME`` beyond). TAG and SQL filters
  (docs/filter.md; ``ILLEGAL_FILTER_EXPRESSION`` for a bad one, or SQL while ``enable_property_filter`` is off),
  applied by the pop engine. Each message carries its receipt handle, delivery attempt
  (reconsume times + 1) and invisible duration.
- Auto renew (push consumers): each message of an ``auto_renew`` receive is tracked and renewed while its
  client's session lives (server/auto_renew.py, on the broker's clock); the client keeps using its first
  handle, which the ack, nack and forward below map to the current one.
- AckMessage: per-entry status; a garbage, stale or foreign handle is ``INVALID_RECEIPT_HANDLE`` (40013).
- ChangeInvisibleDuration: always returns a usable handle (the new one, or the request's on error), since
  the Python client overwrites its handle with the reply before it checks the status.
- QueryAssignment: a non-FIFO group gets one assignment with queue id -1 (any queue) on this broker; a FIFO
  group one per readable queue; ``FORBIDDEN`` when the topic has no readable queue. While the group has gray
  and normal clients alive (broker/gray_split.py), each client gets one assignment per queue of its share
  (gray: the gray queues; normal: the rest), and ReceiveMessage pops only from that share.
- ForwardMessageToDeadLetterQueue: the message goes to ``%DLQ%<group>`` (reason CLIENT_FORWARD), acked.
- Lite topics (broker/lite, docs/lite.md): a receive on a LITE parent topic serves the lite topics the client
  subscribed with SyncLiteSubscription, in order per lite topic (no auto renew: the invisible time is the
  request's, else 60 s); ack, nack and forward recognise lite receipt handles by their form.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from pocketmq.broker.lite.delivery import is_lite_handle
from pocketmq.broker.lite.subscriptions import SyncAction
from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.broker.pop.receive import MAX_INVISIBLE_MS, PopRequest
from pocketmq.broker.pop.renewal import RenewalTable
from pocketmq.common import properties as props
from pocketmq.common.errors import (
    BadRequestError,
    InvalidReceiptHandleError,
    NoPermissionError,
    PocketMQError,
    ServiceNotAvailableError,
)
from pocketmq.common.message import Message
from pocketmq.common.topic import MessageType, dlq_topic
from pocketmq.protocol import grpc_pop_codec as codec
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.error_codes import V2StatusError, v2_code_of
from pocketmq.protocol.grpc_codec import (
    decode_sync_lite_request,
    encode_delivered_message,
    sync_lite_response,
)
from pocketmq.server.auto_renew import AutoRenewer
from pocketmq.server.grpc_validation import check_invisible_ms, check_receive_numbers, check_topic

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

DEFAULT_LONG_POLLING_MS = 20_000
DLQ_ORIGIN_LITE_TOPIC = "DLQ_ORIGIN_LITE_TOPIC"  # PocketMQ's: the lite topic of a forwarded lite message
DEADLINE_MARGIN_MS = 500
MAX_BATCH = 32


def check_group(group: str) -> None:
    if not group:
        raise V2StatusError(V2StatusCode.ILLEGAL_CONSUMER_GROUP, "the consumer group is required")


def checked_receive(req: codec.ReceiveRequest, context, default_invisible_ms: int) -> tuple[int, int, int]:
    """Check a ReceiveMessage request; its (batch size, invisible time ms, long polling ms), the polling time cut
    to answer before the client's deadline. ``default_invisible_ms``: for a request without an invisible time."""
    check_group(req.group)
    check_topic(req.topic)
    invisible_ms = req.invisible_ms if req.invisible_ms is not None else default_invisible_ms
    check_invisible_ms(invisible_ms, MAX_INVISIBLE_MS, zero_ok=False)
    check_receive_numbers(req.batch_size, req.long_polling_ms)
    poll_ms = req.long_polling_ms if req.long_polling_ms is not None else DEFAULT_LONG_POLLING_MS
    remaining_s = context.time_remaining() if context is not None else None
    if remaining_s is not None:
        poll_ms = min(poll_ms, int(remaining_s * 1000) - DEADLINE_MARGIN_MS)
    return max(1, min(req.batch_size or MAX_BATCH, MAX_BATCH)), invisible_ms, max(poll_ms, 0)


def checked_ack_request(request) -> tuple[str, str, list[codec.AckEntry]]:
    """(group, topic, entries) of an AckMessage request, checked."""
    group, topic, entries = codec.decode_ack_request(request)
    check_group(group)
    check_topic(topic)
    if not entries:
        raise BadRequestError("no entry to ack")
    return group, topic, entries


def check_change_invisible(group: str, topic: str, invisible_ms: int) -> None:
    check_group(group)
    check_topic(topic)
    check_invisible_ms(invisible_ms, MAX_INVISIBLE_MS, zero_ok=True)


class ConsumerRpcs:
    def __init__(self, broker: Broker, sessions=None, renewals: RenewalTable | None = None):
        self._broker = broker
        self._sessions = sessions
        self.renewer = AutoRenewer(
            renewals if renewals is not None else RenewalTable(),
            self._change_invisible,
            sessions,
            clock=broker.clock,
            metrics=broker.metrics,
        )
        self.renewals = self.renewer.renewals

    # -- lifecycle (the auto-renew task) ----------------------------------------------------------------------------
    def start(self) -> None:
        self.renewer.start()

    async def stop(self) -> None:
        await self.renewer.stop()

    async def _change_invisible(self, group: str, handle: ReceiptHandle, invisible_ms: int) -> ReceiptHandle:
        if self._broker.pop is None:
            raise ServiceNotAvailableError("POP is not served here")
        return await self._broker.pop.change_invisible(group, handle, invisible_ms)

    # -- receive ----------------------------------------------------------------------------------------------------
    async def receive(self, request, context, client_id: str = ""):
        """The ReceiveMessage stream (an async generator of responses)."""
        receiving = self._sessions.receiving(client_id) if self._sessions is not None else contextlib.nullcontext()
        with receiving as client_gone:
            try:
                if not self._broker.started:
                    raise ServiceNotAvailableError("the broker is starting or stopping")
                req = codec.decode_receive_request(request)
                pop_request = self._pop_request(req, context, client_id, client_gone)
                config = self._broker.topics.get(req.topic)
                if config is not None and config.message_type is MessageType.LITE:
                    lite = await self._broker.lite.receive(
                        req.group,
                        req.topic,
                        client_id,
                        pop_request.max_count,
                        pop_request.invisible_ms,
                        pop_request.poll_ms,
                    )
                    async for response in self._lite_responses(lite, pop_request.invisible_ms):
                        yield response
                    return
                result = await self._broker.pop.pop(pop_request)
            except PocketMQError as exc:
                yield codec.receive_status(v2_code_of(exc), str(exc))
                return
            now_ms = self._broker.clock.now_ms()
            delivered = result.delivered()
            if not delivered:
                yield codec.receive_status(V2StatusCode.MESSAGE_NOT_FOUND, "no new message")
            else:
                renew = req.auto_renew and req.invisible_ms is None
                yield codec.receive_status()
                for msg, handle in delivered:
                    text = handle.encode()
                    if renew:
                        self.renewer.track(text, client_id, req.group, handle)
                    yield codec.receive_message(
                        encode_delivered_message(
                            msg,
                            receipt_handle=text,
                            delivery_attempt=msg.reconsume_times + 1,
                            invisible_duration_ms=result.invisible_ms,
                        )
                    )
            yield codec.receive_delivery_timestamp(now_ms)

    async def _lite_responses(self, delivered, invisible_ms: int):
        if not delivered:
            yield codec.receive_status(V2StatusCode.MESSAGE_NOT_FOUND, "no new message")
        else:
            yield codec.receive_status()
            for lite in delivered:
                yield codec.receive_message(
                    encode_delivered_message(
                        lite.message,
                        receipt_handle=lite.handle,
                        delivery_attempt=lite.attempt,
                        invisible_duration_ms=invisible_ms,
                    )
                )
        yield codec.receive_delivery_timestamp(self._broker.clock.now_ms())

    def _pop_request(self, req: codec.ReceiveRequest, context, client_id: str, client_gone) -> PopRequest:
        batch, invisible_ms, poll_ms = checked_receive(req, context, self.renewals.invisible_ms)
        group_config = self._broker.groups.get(req.group)
        fifo = bool(group_config is not None and group_config.consume_message_orderly)
        # Only a FIFO push consumer receives per queue (one assignment each); holding any other receive to the
        # queue it named would long-poll an empty queue while others hold ready messages.
        per_queue = fifo and req.auto_renew
        return PopRequest(
            req.group,
            req.topic,
            batch,
            invisible_ms,
            queue_id=req.queue_id if per_queue else -1,
            read_filter=self._broker.filters.read_filter(req.filter_type, req.filter_expression),
            poll_ms=poll_ms,
            client_id=client_id,
            client_gone=client_gone,
        )

    # -- ack --------------------------------------------------------------------------------------------------------
    async def ack(self, request, context):
        try:
            group, topic, entries = checked_ack_request(request)
        except PocketMQError as exc:
            return codec.ack_error_response(v2_code_of(exc), str(exc))
        handles, results = [], []
        for entry in entries:
            if is_lite_handle(entry.receipt_handle):
                try:
                    self._broker.lite.ack(group, entry.receipt_handle)
                    results.append((entry, V2StatusCode.OK, "OK"))
                except PocketMQError as exc:
                    results.append((entry, v2_code_of(exc), str(exc)))
                continue
            try:
                handles.append((entry, await self.renewer.current_handle(entry.receipt_handle, group, topic)))
            except InvalidReceiptHandleError as exc:
                results.append((entry, v2_code_of(exc), str(exc)))
        outcomes = await self._broker.pop.ack(group, [h for _, h in handles])
        for (entry, _), error in zip(handles, outcomes):
            results.append((entry, V2StatusCode.OK, "OK") if error is None else (entry, v2_code_of(error), str(error)))
        return codec.ack_response(results)

    # -- change invisible duration ------------------------------------------------------------------------------
    async def change_invisible(self, request, context):
        group, topic, text, invisible_ms, _ = codec.decode_change_invisible_request(request)
        try:
            check_change_invisible(group, topic, invisible_ms)
            if is_lite_handle(text):
                return codec.change_invisible_response(
                    V2StatusCode.OK, "OK", self._broker.lite.change_invisible(group, text, invisible_ms)
                )
            new = await self._broker.pop.change_invisible(
                group, await self.renewer.current_handle(text, group, topic), invisible_ms
            )
        except PocketMQError as exc:
            return codec.change_invisible_response(v2_code_of(exc), str(exc), text)
        return codec.change_invisible_response(V2StatusCode.OK, "OK", new.encode())

    # -- assignment -------------------------------------------------------------------------------------------------
    async def query_assignment(self, request, context, client_id: str = ""):
        try:
            topic, group, endpoints = codec.decode_assignment_request(request)
            check_group(group)
            check_topic(topic)
            config = self._broker.topics.require(topic)
            if not config.readable or config.read_queue_nums == 0:
                raise NoPermissionError(f"topic {topic!r} has no readable queue here")
            group_config = self._broker.groups.get(group)
            fifo = bool(group_config is not None and group_config.consume_message_orderly)
            share = self._broker.gray.share(group, client_id)
            per_queue = fifo or share.split
            queue_ids = share.queue_ids(config.read_queue_nums, config.gray_queue_ratio) if per_queue else [-1]
        except PocketMQError as exc:
            return codec.assignment_error_response(v2_code_of(exc), str(exc))
        return codec.assignment_response(topic, self._broker.broker_name, queue_ids, endpoints)

    # -- dead letter --------------------------------------------------------------------------------------------
    async def forward_to_dead_letter(self, request, context):
        try:
            group, topic, text, _ = codec.decode_forward_request(request)
            check_group(group)
            check_topic(topic)
            if is_lite_handle(text):
                await self._forward_lite(group, text)
            else:
                await self._broker.pop.forward_to_dead_letter(
                    group, await self.renewer.current_handle(text, group, topic)
                )
        except PocketMQError as exc:
            return codec.forward_response(v2_code_of(exc), str(exc))
        return codec.forward_response()

    async def _forward_lite(self, group: str, text: str) -> None:
        """A lite message to ``%DLQ%<group>``, then acked. The DLQ is no LITE topic: the lite topic moves to the
        property ``DLQ_ORIGIN_LITE_TOPIC``."""
        found = self._broker.lite.delivered_message(group, text)
        if found is not None:
            msg, attempt = found
            properties = dict(msg.properties)
            properties[DLQ_ORIGIN_LITE_TOPIC] = properties.pop(props.LITE_TOPIC, "")
            properties[props.DLQ_ORIGIN_TOPIC] = msg.topic
            properties[props.DLQ_ORIGIN_MESSAGE_ID] = msg.msg_id
            properties[props.RECONSUME_TIME] = str(attempt)
            dlq = dlq_topic(group)
            await self._broker.messages.send([Message(topic=dlq, body=msg.body, properties=properties)], topic=dlq)
        self._broker.lite.ack(group, text)

    # -- lite subscriptions -----------------------------------------------------------------------------------------
    async def sync_lite_subscription(self, request, context, client_id: str = ""):
        action, topic, group, lite_topics = decode_sync_lite_request(request)
        check_group(group)
        check_topic(topic)
        config = self._broker.topics.require(topic)
        if config.message_type is not MessageType.LITE:
            raise V2StatusError(V2StatusCode.ILLEGAL_TOPIC, f"topic {topic!r} is {config.message_type.value}, not LITE")
        if not client_id:
            raise V2StatusError(V2StatusCode.CLIENT_ID_REQUIRED, "header x-mq-client-id is required")
        if action not in SyncAction.__members__:
            raise BadRequestError(f"unknown lite subscription action {action}")
        self._broker.lite.sync(group, topic, client_id, SyncAction[action], lite_topics)
        return sync_lite_response()
