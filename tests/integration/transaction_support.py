"""What the transaction integration tests share: reading what reached consumers."""

from __future__ import annotations

from collections import Counter

from pocketmq.client import ClientConfig, PullConsumer, PullStatus


def bodies(config: ClientConfig, topic: str, *, with_broker: bool = False) -> Counter:
    """Every message body of ``topic`` over all its queues (read through the route, as consumers do), counted;
    ``with_broker`` keys them ``broker:body``."""
    found: Counter = Counter()
    with PullConsumer("tx-test-reader", config) as consumer:
        for queue in consumer.fetch_queues(topic):
            offset, end = 0, consumer.max_offset(queue)
            while offset < end:
                result = consumer.pull(queue, offset, 64)
                if result.status is PullStatus.FOUND:
                    found.update(
                        f"{queue.broker_name}:{m.body.decode()}" if with_broker else m.body.decode()
                        for m in result.messages
                    )
                offset = result.next_begin_offset
    return found
