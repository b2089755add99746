"""A consumer's message trace (``ClientConfig.enable_trace``, client/tracing.py): its tracer, and the producer
(group ``_INNER_TRACE_PRODUCER``, on the consumer's client instance) that sends the trace messages."""

from __future__ import annotations

from dataclasses import replace

from pocketmq.client.config import ClientConfig
from pocketmq.client.instance import ClientInstance
from pocketmq.client.producer import AsyncProducer, ProducerOptions
from pocketmq.client.tracing import TRACE_PRODUCER_GROUP, ClientTracer


class ConsumerTracing:
    def __init__(self, tracer: ClientTracer, producer: AsyncProducer):
        self.tracer = tracer
        self._producer = producer

    @classmethod
    async def start(cls, config: ClientConfig, instance: ClientInstance) -> ConsumerTracing:
        # its own sends are trace messages: not traced again
        producer = AsyncProducer(
            replace(config, enable_trace=False), ProducerOptions(group=TRACE_PRODUCER_GROUP), instance=instance
        )
        await producer.start()
        tracer = ClientTracer(producer.send, instance.clock, client_host=instance.client_ip)
        tracer.start()
        return cls(tracer, producer)

    async def stop(self) -> None:
        await self.tracer.stop()
        await self._producer.shutdown()
