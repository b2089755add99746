"""The requests a broker sends a push consumer on an operator's behalf (docs/protocol.md, docs/cli.md):

- RESET_CONSUMER_CLIENT_OFFSET (oneway): the group's offsets of a topic were reset; each queue this consumer
  holds pulls again from its new offset (``AsyncPushConsumer.reset_offsets``).
- GET_CONSUMER_RUNNING_INFO: what the consumer is: its settings, subscriptions, and per held queue the offset it
  will commit and the messages it holds (RocketMQ's ConsumerRunningInfo; ``protocol/queue_tables.py``).
- CONSUME_MESSAGE_DIRECTLY: the message in the body goes to the listener once, outside of any queue; the answer
  says what the listener returned (RocketMQ's CR_SUCCESS, CR_LATER, CR_RETURN_NULL, CR_THROW_EXCEPTION). Its
  offset, retries and the group's progress are untouched: it is a test of the listener.

One dispatcher per client instance serves the three codes for every push consumer on it, by group.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING

import pocketmq
from pocketmq.client.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    StagedConcurrentListener,
)
from pocketmq.client.listener_runner import is_async_listener
from pocketmq.common.message import MessageQueue
from pocketmq.common.record import decode_record
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.queue_tables import dumps_with_queue_tables, loads, queue_entries
from pocketmq.runtime.periodic import spawn_watched

if TYPE_CHECKING:
    from pocketmq.client.instance import ClientInstance
    from pocketmq.client.push_consumer import AsyncPushConsumer

log = logging.getLogger(__name__)

CODES = (
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
    RequestCode.GET_CONSUMER_RUNNING_INFO,
    RequestCode.CONSUME_MESSAGE_DIRECTLY,
)
_REMARK_MAX_CHARS = 512


class ConsumerRequestDispatcher:
    """The handler of ``CODES`` on one client instance: each request goes to the push consumer of its group."""

    def __init__(self) -> None:
        self.consumers: dict[str, AsyncPushConsumer] = {}

    def __call__(self, conn, request: RemotingCommand):
        fields = request.ext_fields
        group = fields.get("group" if request.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET else "consumerGroup")
        consumer = self.consumers.get(group or "")
        if request.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            if consumer is not None:
                spawn_watched(_reset(consumer, request.body), f"pocketmq-reset-offset-{group}")
            return None  # oneway
        if consumer is None:
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE, remark=f"no push consumer of group {group} here")
        if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return request.response(ResponseCode.SUCCESS, body=running_info(consumer))
        return _consume_directly(consumer, request)


def serve_consumer_requests(instance: ClientInstance, consumer: AsyncPushConsumer) -> None:
    """Route the group's requests on ``instance`` to ``consumer`` (until ``stop_serving``)."""
    dispatcher = instance.request_handlers.get(CODES[0])
    if not isinstance(dispatcher, ConsumerRequestDispatcher):
        dispatcher = ConsumerRequestDispatcher()
        for code in CODES:
            instance.request_handlers[code] = dispatcher
    dispatcher.consumers[consumer.group] = consumer


def stop_serving(instance: ClientInstance, group: str) -> None:
    dispatcher = instance.request_handlers.get(CODES[0])
    if isinstance(dispatcher, ConsumerRequestDispatcher):
        dispatcher.consumers.pop(group, None)


async def _reset(consumer: AsyncPushConsumer, body: bytes) -> None:
    try:
        entries = queue_entries(loads(body or b"{}").get("offsetTable") or [], "offset")
        offsets = {MessageQueue(e["topic"], e["brokerName"], int(e["queueId"])): int(e["offset"]) for e in entries}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("event=reset_offset_ignored group=%s reason=bad_body error=%s", consumer.group, exc)
        return
    await consumer.reset_offsets(offsets)


def running_info(consumer: AsyncPushConsumer) -> bytes:
    """RocketMQ's ConsumerRunningInfo JSON, its ``mqTable`` of ProcessQueueInfo as fastjson writes it."""
    opts = consumer.options
    info = {
        "properties": {
            "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
            "PROP_CONSUMEORDERLY": str(consumer.orderly).lower(),
            "PROP_THREADPOOL_CORE_SIZE": str(opts.consume_thread_max),
            "PROP_CLIENT_VERSION": f"PocketMQ {pocketmq.__version__}",
            "messageModel": opts.message_model.value,
            "consumeFromWhere": opts.consume_from_where.value,
            "pullBatchSize": str(opts.pull_batch_size),
            "consumeMessageBatchMaxSize": str(opts.consume_batch_size),
            "language": "PYTHON",
            "consumedTotal": str(consumer.consume_service.consumed_total),
        },
        "subscriptionSet": [
            {"topic": topic, "subString": selector.expression, "expressionType": selector.expression_type}
            for topic, selector in sorted(consumer.subscriptions.items(), key=lambda item: item[0])
        ],
    }
    queues = {
        mq: {
            "commitOffset": consumer.offset_store.table.get(mq, -1),
            "cachedMsgCount": pq.count,
            "cachedMsgSizeInMiB": pq.size_bytes // (1024 * 1024),
            "locked": pq.locked,
            "droped": pq.dropped,  # sic: RocketMQ's field name
        }
        for mq, pq in consumer.process_queues.items()
    }
    return dumps_with_queue_tables(info, {"mqTable": queues})


async def _consume_directly(consumer: AsyncPushConsumer, request: RemotingCommand) -> RemotingCommand:
    listener = consumer.listener
    if listener is None or isinstance(listener, StagedConcurrentListener):
        return request.response(
            ResponseCode.SYSTEM_ERROR, remark="a staged listener is not called outside of its queue's stages"
        )
    try:
        msg, _ = decode_record(request.body)
    except Exception as exc:
        return request.response(ResponseCode.SYSTEM_ERROR, remark=f"the message does not decode: {exc}")
    consumer.namespace.unwrap_message(msg.decompress())
    mq = MessageQueue(msg.topic, request.ext_fields.get("brokerName", ""), msg.queue_id)
    context = ConsumeOrderlyContext(mq) if consumer.orderly else ConsumeConcurrentlyContext(mq)
    loop = asyncio.get_running_loop()
    started_ms = loop.time() * 1000
    remark = ""
    try:
        if is_async_listener(listener):
            status = await listener([msg], context)
        else:
            status = await loop.run_in_executor(None, listener, [msg], context)
    except Exception as exc:  # user code: reported, as RocketMQ does
        status, remark = None, f"{type(exc).__name__}: {exc}"[:_REMARK_MAX_CHARS]
        result = "CR_THROW_EXCEPTION"
    else:
        if status in (ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS):
            result = "CR_SUCCESS"
        elif status is None:
            result = "CR_RETURN_NULL"
        else:
            result = "CR_LATER"
    body = {
        "order": consumer.orderly,
        "autoCommit": True,
        "consumeResult": result,
        "remark": remark or (status.value if status is not None else "the listener returned None"),
        "spentTimeMills": int(loop.time() * 1000 - started_ms),
    }
    return request.response(ResponseCode.SUCCESS, body=json.dumps(body).encode())
