"""The v2 pull consumer RPCs over the same store and consumer offsets as the remoting pull
(``broker.messages.pull``, ``broker.offsets``): a gRPC pull consumer and a remoting one of the same group share
their committed offsets.

- PullMessage (stream): up to ``batch_size`` messages (1..``MAX_PULL_BATCH``, 32 when unset) of one queue
  from ``offset``, long-polling up to ``long_polling_timeout`` (20 s when unset, and always an answer before
  the client's deadline) when nothing is there yet. Answers ``{status OK}``, the messages, ``{next_offset}``;
  nothing new is ``{status MESSAGE_NOT_FOUND}`` + next offset; an offset outside the queue is ``{status
  ILLEGAL_OFFSET}`` + the offset to continue from (the queue's min or max). TAG and SQL filters (docs/filter.md;
  ILLEGAL_FILTER_EXPRESSION for a bad one); the next offset is past the messages a filter dropped.
- UpdateOffset: commit the group's offset of the queue (as UPDATE_CONSUMER_OFFSET: only forward; a negative
  one or one past the queue's end is ILLEGAL_OFFSET).
- GetOffset: the group's committed offset; OFFSET_NOT_FOUND when it never committed one.
- QueryOffset: BEGINNING is the queue's min offset, END its max (the next to be written), TIMESTAMP the first
  message stored at or after the time (BAD_REQUEST without one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.broker.messages import PullStatus
from pocketmq.common.errors import IllegalQueueIdError, PocketMQError, TopicNotExistError
from pocketmq.common.record import decode_record
from pocketmq.protocol import grpc_pull_codec as codec
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.error_codes import V2StatusError, v2_code_of
from pocketmq.protocol.grpc_codec import encode_delivered_message
from pocketmq.server.grpc_validation import check_receive_numbers, check_topic

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

MAX_PULL_BATCH = 256  # the remoting pull's bound too
DEFAULT_PULL_BATCH = 32
DEFAULT_LONG_POLLING_MS = 20_000
DEADLINE_MARGIN_MS = 500


def _illegal_offset(message: str) -> V2StatusError:
    return V2StatusError(V2StatusCode.ILLEGAL_OFFSET, message)


class PullRpcs:
    def __init__(self, broker: Broker):
        self._broker = broker

    def _check_queue(self, queue: codec.QueueRef) -> None:
        check_topic(queue.topic)
        config = self._broker.topics.get(queue.topic)
        if config is None:
            raise TopicNotExistError(f"topic {queue.topic!r} does not exist on this broker")
        if not 0 <= queue.queue_id < config.read_queue_nums:
            raise IllegalQueueIdError(f"topic {queue.topic!r} has no queue {queue.queue_id}")

    @staticmethod
    def _check_group(group: str) -> None:
        if not group:
            raise V2StatusError(V2StatusCode.ILLEGAL_CONSUMER_GROUP, "the consumer group is required")

    # -- pull -----------------------------------------------------------------------------------------------------
    async def pull(self, request, context):
        """The PullMessage stream (an async generator of responses)."""
        try:
            req = codec.decode_pull_request(request)
            self._check_group(req.group)
            self._check_queue(req.queue)
            read_filter = self._broker.filters.read_filter(req.filter_type, req.filter_expression)
            if req.queue_offset < 0:
                raise _illegal_offset(f"offset {req.queue_offset} is negative")
            check_receive_numbers(req.batch_size, req.long_polling_ms)
            poll_ms = req.long_polling_ms if req.long_polling_ms is not None else DEFAULT_LONG_POLLING_MS
            remaining_s = context.time_remaining() if context is not None else None
            if remaining_s is not None:
                poll_ms = min(poll_ms, int(remaining_s * 1000) - DEADLINE_MARGIN_MS)
            outcome = await self._broker.messages.pull(
                req.group,
                req.queue.topic,
                req.queue.queue_id,
                req.queue_offset,
                max(1, min(req.batch_size or DEFAULT_PULL_BATCH, MAX_PULL_BATCH)),
                read_filter=read_filter,
                suspend_timeout_ms=max(poll_ms, 0),
            )
        except PocketMQError as exc:
            yield codec.pull_status(v2_code_of(exc), str(exc))
            return
        if outcome.status is PullStatus.FOUND:
            yield codec.pull_status()
            for record in outcome.records:
                yield codec.pull_message(encode_delivered_message(decode_record(record)[0]))
        elif outcome.status is PullStatus.OFFSET_MOVED:
            yield codec.pull_status(
                V2StatusCode.ILLEGAL_OFFSET,
                f"offset {req.queue_offset} is outside [{outcome.min_offset}, {outcome.max_offset}] of the queue: "
                f"continue at {outcome.next_begin_offset}",
            )
        else:  # nothing new, or nothing that matches the filter (the next offset skips what did not)
            yield codec.pull_status(V2StatusCode.MESSAGE_NOT_FOUND, "no new message")
        yield codec.pull_next_offset(outcome.next_begin_offset)

    # -- offsets --------------------------------------------------------------------------------------------------
    async def update_offset(self, request, context):
        group, queue, queue_offset = codec.decode_update_offset_request(request)
        self._check_group(group)
        self._check_queue(queue)
        max_offset = self._broker.store.max_queue_offset(queue.topic, queue.queue_id)
        if not 0 <= queue_offset <= max_offset:
            raise _illegal_offset(f"offset {queue_offset} is outside [0, {max_offset}] of the queue")
        self._broker.offsets.commit(group, queue.topic, queue.queue_id, queue_offset)
        return codec.update_offset_response()

    async def get_offset(self, request, context):
        group, queue = codec.decode_get_offset_request(request)
        self._check_group(group)
        self._check_queue(queue)
        queue_offset = self._broker.offsets.query(group, queue.topic, queue.queue_id)
        if queue_offset is None:
            raise V2StatusError(
                V2StatusCode.OFFSET_NOT_FOUND, f"group {group} has no offset for {queue.topic}/{queue.queue_id}"
            )
        return codec.offset_response("GetOffset", queue_offset)

    async def query_offset(self, request, context):
        queue, policy, timestamp_ms = codec.decode_query_offset_request(request)
        self._check_queue(queue)
        store = self._broker.store
        if policy == "BEGINNING":
            queue_offset = store.min_queue_offset(queue.topic, queue.queue_id)
        elif policy == "END":
            queue_offset = store.max_queue_offset(queue.topic, queue.queue_id)
        elif policy == "TIMESTAMP" and timestamp_ms is not None:
            queue_offset = store.queue_offset_by_time(queue.topic, queue.queue_id, timestamp_ms)
        else:
            raise V2StatusError(
                V2StatusCode.BAD_REQUEST, f"query offset policy {policy} needs a timestamp or is unknown"
            )
        return codec.offset_response("QueryOffset", queue_offset)
