"""Remoting handlers of consumer retries and orderly queue locks.

- CONSUMER_SEND_MSG_BACK (36), header fields as 4.x clients send them: ``offset`` (commit log offset),
  ``group``, ``delayLevel`` (0: the broker decides, < 0: DLQ), ``originMsgId``, ``originTopic``,
  ``maxReconsumeTimes`` (optional), ``unitMode`` (ignored). SUCCESS, no body.
- LOCK_BATCH_MQ (41), JSON body ``{"consumerGroup", "clientId", "mqSet": [{"topic", "brokerName",
  "queueId"}]}``; the reply body ``{"lockOKMQSet": [...]}`` lists the queues now locked by that client.
- UNLOCK_BATCH_MQ (42), the same body; SUCCESS, no body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.broker.send_back import SendBackRequest
from pocketmq.common.errors import BadRequestError
from pocketmq.common.message import MessageQueue
from pocketmq.common.topic import group_name_problem, topic_name_problem
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.headers import INT32_MAX
from pocketmq.protocol.remoting_headers import json_body, json_bytes
from pocketmq.protocol.request_headers import NAME_MAX_CHARS, ConsumerSendMsgBackRequestHeader
from pocketmq.protocol.transport import RemotingConnection, RequestRouter

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


def _checked_name(name: str, problem_of, field: str) -> str:
    problem = problem_of(name)
    if problem:
        raise BadRequestError(f"lock batch {field}: {problem}")
    return name


def queue_to_json(mq: MessageQueue) -> dict:
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


def queue_from_json(obj) -> MessageQueue:
    if not isinstance(obj, dict):
        raise BadRequestError("a message queue must be a JSON object")
    topic, broker_name, queue_id = obj.get("topic"), obj.get("brokerName"), obj.get("queueId")
    if isinstance(queue_id, str) and queue_id.isascii() and queue_id.isdigit():
        queue_id = int(queue_id)  # some clients send numbers as strings
    if not isinstance(topic, str) or not isinstance(broker_name, str) or type(queue_id) is not int:
        raise BadRequestError("a message queue needs topic and brokerName (strings) and queueId (an integer)")
    if not 0 <= queue_id <= INT32_MAX or not broker_name or len(broker_name) > NAME_MAX_CHARS:
        raise BadRequestError(f"message queue queueId {queue_id} or brokerName is out of range")
    return MessageQueue(_checked_name(topic, topic_name_problem, "mqSet.topic"), broker_name, queue_id)


def _lock_body(body: bytes) -> tuple[str, str, list[MessageQueue]]:
    obj = json_body(body, "lock batch")
    if not isinstance(obj, dict):
        raise BadRequestError("lock batch body must be a JSON object")
    group = _checked_name(str(obj.get("consumerGroup") or ""), group_name_problem, "consumerGroup")
    client_id = obj.get("clientId")
    if not isinstance(client_id, str) or not client_id or len(client_id) > NAME_MAX_CHARS:
        raise BadRequestError(f"lock batch body lacks clientId (a string of at most {NAME_MAX_CHARS} characters)")
    mq_set = obj.get("mqSet") or []
    if not isinstance(mq_set, list):
        raise BadRequestError("lock batch mqSet must be a list")
    return group, client_id, [queue_from_json(o) for o in mq_set]


class RetryHandlers:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def register(self, router: RequestRouter) -> None:
        router.register(RequestCode.CONSUMER_SEND_MSG_BACK, self.consumer_send_msg_back)
        router.register(RequestCode.LOCK_BATCH_MQ, self.lock_batch_mq)
        router.register(RequestCode.UNLOCK_BATCH_MQ, self.unlock_batch_mq)

    async def consumer_send_msg_back(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = ConsumerSendMsgBackRequestHeader.parse(request.ext_fields)
        send_back = SendBackRequest(
            group=h.group,
            phys_offset=h.offset,
            delay_level=h.delay_level,
            origin_msg_id=h.origin_msg_id,
            origin_topic=h.origin_topic,
            max_reconsume_times=h.max_reconsume_times,
        )
        await self._broker.send_back.send_back(send_back)
        return request.response(ResponseCode.SUCCESS)

    async def lock_batch_mq(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group, client_id, queues = _lock_body(request.body)
        locked = self._broker.queue_locks.try_lock(group, client_id, queues, self._broker.clock.now_ms())
        return request.response(
            ResponseCode.SUCCESS, body=json_bytes({"lockOKMQSet": [queue_to_json(mq) for mq in locked]})
        )

    async def unlock_batch_mq(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group, client_id, queues = _lock_body(request.body)
        self._broker.queue_locks.unlock(group, client_id, queues)
        return request.response(ResponseCode.SUCCESS)
