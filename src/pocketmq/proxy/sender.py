"""Sending v2 clients' messages to the brokers: SEND_MESSAGE_V2 through the SDK producer (queue choice, retries
on another broker, route refresh), half messages with the prepared flag.

The SDK's ``MessageGroupSelector`` puts a FIFO message (its message group is the ``SHARDING_KEY``) in the queue
of its group over every broker's writable queues, and other messages round robin, as RocketMQ's proxy picks:
the queue a v2 client names is ignored. The message id the client made stays the message's ``UNIQ_KEY``.
"""

from __future__ import annotations

from pocketmq.client.producer import AsyncProducer, SendResult, SendStatus
from pocketmq.client.transaction_producer import half_request_builder
from pocketmq.common.message import Message
from pocketmq.protocol.codes import V2StatusCode

# A message stored with a weaker guarantee is not an OK send, as on the embedded front end.
V2_CODE_OF_SEND_STATUS = {
    SendStatus.SEND_OK: V2StatusCode.OK,
    SendStatus.FLUSH_DISK_TIMEOUT: V2StatusCode.MASTER_PERSISTENCE_TIMEOUT,
    SendStatus.FLUSH_SLAVE_TIMEOUT: V2StatusCode.SLAVE_PERSISTENCE_TIMEOUT,
    SendStatus.SLAVE_NOT_AVAILABLE: V2StatusCode.HA_NOT_AVAILABLE,
}


class ProxySender(AsyncProducer):
    """The worker's one producer; the producer group of a half message is its ``PGROUP`` property."""

    _kind = "proxy sender"

    async def send_message(self, message: Message, *, half: bool) -> SendResult:
        build = self._prepare_single(message, None, None)
        if half:
            build = half_request_builder(build)
        return await self._send_with_retries(message, build, None, None, self.options.retry_times_when_send_failed)
