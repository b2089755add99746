"""A real broker for a test suite or a script: ``with embedded_broker() as b:`` (docs/testing.md).

The broker is a ``pocketmq serve`` process with its embedded name server, every port ephemeral on 127.0.0.1
and its own fresh data directory, started from a standby that imported the broker ahead of time
(``pocketmq.testing.standby``) and tied to this process by a pipe: it stops when this process ends, however
that ends. ``EmbeddedBroker`` gives the addresses each kind of client needs and helpers for the usual first steps
of a test: create a topic, produce, read back.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pocketmq.client import Admin, ClientConfig, Message, MessageExt, Producer, PullConsumer, SendResult
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import PocketProcess, broker_process

DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_READ_TIMEOUT_S = 10.0
READ_GROUP = "pocketmq-testing-reader"


class EmbeddedBroker:
    """A running broker and its name server. Addresses: ``namesrv_addr`` for the PocketMQ SDK, the CLI and
    RocketMQ 4.x clients (they find the broker through it), ``grpc_endpoint`` for RocketMQ 5.x clients,
    ``remoting_addr`` for talking to the broker itself. The helpers are synchronous and may be called from
    plain and asyncio tests alike."""

    def __init__(self, process: PocketProcess):
        self.process = process
        self._topic_numbers = itertools.count(1)
        self._admin: Admin | None = None
        self._producer: Producer | None = None

    @property
    def namesrv_addr(self) -> str:
        return self.process.namesrv

    @property
    def grpc_endpoint(self) -> str:
        return self.process.grpc

    @property
    def remoting_addr(self) -> str:
        return self.process.remoting

    @property
    def data_dir(self) -> Path:
        return self.process.workdir / "data"

    def client_config(self, **fields) -> ClientConfig:
        """The SDK's configuration for this broker; ``fields`` set any other ``ClientConfig`` field."""
        return ClientConfig(namesrv_addr=self.namesrv_addr, **fields)

    def unique_topic(self, prefix: str = "test-topic") -> str:
        """A topic name not used before on this broker (tests sharing a broker keep apart by topic)."""
        return f"{prefix}-{os.getpid()}-{next(self._topic_numbers)}"

    def create_topic(self, topic: str | None = None, *, queues: int = 4, **options) -> str:
        """Create ``topic`` (a ``unique_topic()`` when None) and wait until its route is served; returns its name.
        ``options`` are those of ``Admin.create_topic`` (``message_type``, ``order`` ...)."""
        topic = topic or self.unique_topic()
        self._admin_client().create_topic(topic, queues=queues, **options)
        return topic

    def produce(self, topic: str, messages: Iterable[Message | str | bytes]) -> list[SendResult]:
        """Send each message (a plain body becomes ``Message.create(topic, body)``) in order, one by one."""
        producer = self._producer_client()
        return [producer.send(m if isinstance(m, Message) else Message.create(topic, m)) for m in messages]

    def read(self, topic: str, count: int, *, timeout_s: float = DEFAULT_READ_TIMEOUT_S) -> list[MessageExt]:
        """Every message of ``topic`` from the start of its queues, once there are at least ``count`` of them
        (AssertionError after ``timeout_s``): queue by queue, each queue's in order. Reads commit nothing."""
        with PullConsumer(READ_GROUP, self.client_config()) as consumer:
            queues = consumer.fetch_queues(topic)

            def enough() -> list[MessageExt] | None:
                found = [msg for queue in queues for msg in _read_queue(consumer, queue)]
                return found if len(found) >= count else None

            return wait_until(enough, timeout_s, f"{count} messages in {topic}")

    def stop(self) -> None:
        """Close the helpers' clients and stop the broker cleanly."""
        for client in (self._producer, self._admin):
            if client is not None:
                client.shutdown()
        self._producer = self._admin = None
        self.process.stop()

    def _admin_client(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(self.client_config()).start()
        return self._admin

    def _producer_client(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(self.client_config()).start()
        return self._producer

    def __repr__(self) -> str:
        return f"<EmbeddedBroker namesrv={self.process.addresses.get('namesrv')} data_dir={self.data_dir}>"


def _read_queue(consumer: PullConsumer, queue) -> list[MessageExt]:
    messages: list[MessageExt] = []
    queue_offset = 0
    while queue_offset < consumer.max_offset(queue):
        result = consumer.pull(queue, queue_offset)
        messages += result.messages
        if result.next_begin_offset <= queue_offset:
            break
        queue_offset = result.next_begin_offset
    return messages


def start_embedded_broker(
    workdir: Path, *, extra_args: list[str] | None = None, timeout_s: float = DEFAULT_START_TIMEOUT_S
) -> EmbeddedBroker:
    """Start a broker whose files (data, log, ready file) live under ``workdir``, a directory of its own."""
    return EmbeddedBroker(broker_process(workdir, extra_args=extra_args).start(timeout_s))


@contextmanager
def embedded_broker(
    workdir: str | Path | None = None,
    *,
    extra_args: list[str] | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
) -> Iterator[EmbeddedBroker]:
    """A broker for the ``with`` block. Its files live under ``workdir``, or under a new temporary directory that
    is removed afterwards. ``extra_args`` are ``pocketmq serve`` flags (``["--set", "key=value"]``)."""
    own_dir = workdir is None
    root = Path(tempfile.mkdtemp(prefix="pocketmq-")) if workdir is None else Path(workdir)
    try:
        broker = start_embedded_broker(root, extra_args=extra_args, timeout_s=timeout_s)
        try:
            yield broker
        finally:
            broker.stop()
    finally:
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)
