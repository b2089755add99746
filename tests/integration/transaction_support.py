"""What the transaction integration tests share: reading what reached consumers, and a producer that leaves its
transactions to the checks."""

from __future__ import annotations

from collections import Counter

from pocketmq.client import (
    ClientConfig,
    LocalTransactionState,
    ProducerOptions,
    PullConsumer,
    PullStatus,
    TransactionProducer,
)
from pocketmq.testing.processes import PocketProcess
from pocketmq.testing.scrape import wait_rounds


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


def open_ended(config: ClientConfig, group: str, checker=None, **options) -> TransactionProducer:
    """A transactional producer whose local transactions all end UNKNOWN (the broker's checks decide), its checker
    ``checker`` (default: UNKNOWN too); ``options``: more ``TransactionProducer`` arguments (``topics``)."""
    return TransactionProducer(
        config,
        ProducerOptions(group=group),
        executor=lambda message, arg: LocalTransactionState.UNKNOWN,
        checker=checker or (lambda message: LocalTransactionState.UNKNOWN),
        **options,
    )


def wait_check_rounds(broker: PocketProcess, rounds: int) -> None:
    """Wait for ``rounds`` whole transaction check rounds of ``broker`` (started with ``--metrics-port``): what a
    test waits for to show that nothing more is checked or delivered."""
    wait_rounds(broker, "pocketmq_transaction_check_round_seconds", rounds)
