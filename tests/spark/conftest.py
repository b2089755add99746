"""One local[2] SparkSession per test run, and a two-broker PocketMQ cluster of real processes.

Java 17+ is required (``pocketmq.testing.java``): without it every Spark test is skipped with the reason in the
summary, except in CI (``CI=true``), where a missing Java fails them. Workers run this interpreter
(``PYSPARK_PYTHON``), so they import the same ``pocketmq`` and find ``pyspark_pocketmq`` (the data source
registers itself: no ``register`` call anywhere in these tests).
The master is ``local[2,2]``: two cores, and a failed task is tried once more (the sink tests need that).
"""

from __future__ import annotations

import itertools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pocketmq.client.admin import Admin
from pocketmq.client.config import ClientConfig
from pocketmq.common.message import Message, MessageQueue
from pocketmq.spark.clients import client_for
from pocketmq.testing.java import MIN_JAVA_MAJOR, java_problem, java_required
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import PocketProcess, broker_process

QUEUES_PER_BROKER = 2
_topic_numbers = itertools.count()
_SPARK_TESTS = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    """A Spark test that runs out of time ends its test worker (pytest-timeout's ``thread`` method) instead of
    failing where it is (``signal``). A timeout raised inside py4j's socket read leaves the driver's connection to
    the JVM with an answer half read, and every later test of that worker, on the same session-scoped SparkSession,
    read garbage: one slow test failed twenty. An ended worker takes its JVM and brokers with it (their stdin
    closes), and xdist runs the tests it had not run on a new worker, with a new session.

    The timeout bounds the test's own body (``func_only``), not its fixtures: the first test of a worker also sets
    up the worker's SparkSession and broker cluster (44 s of a run at load average 10, against the 120 s timeout
    meant for the test), so a slow machine timed out whichever test came first, and then the first test of the
    worker that replaced it, and so on. The fixtures are bounded on their own: brokers start within their start
    timeout, the waits poll with deadlines."""
    for item in items:
        if _SPARK_TESTS not in Path(str(item.fspath)).parents:
            continue
        marker = item.get_closest_marker("timeout")
        timeout = config.getini("timeout")
        if marker is not None:
            timeout = marker.kwargs.get("timeout", marker.args[0] if marker.args else timeout)
        item.add_marker(pytest.mark.timeout(timeout, method="thread", func_only=True), append=False)


@pytest.fixture(scope="session", autouse=True)
def java():
    """Before any other fixture of these tests (no broker starts for a test that cannot run)."""
    problem = java_problem()
    if problem is None:
        return
    reason = f"Spark tests need Java {MIN_JAVA_MAJOR}+: {problem}"
    if java_required():
        pytest.fail(f"{reason} (CI is set: a missing Java is an error here)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("pocketmq-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@dataclass
class Cluster:
    namesrv: str
    brokers: list[PocketProcess]
    admin: Admin

    def new_topic(self, prefix: str = "spark") -> str:
        """A fresh topic with QUEUES_PER_BROKER queues on each broker, visible in its route."""
        topic = f"{prefix}-{os.getpid()}-{next(_topic_numbers)}"
        self.admin.create_topic(topic, queues=QUEUES_PER_BROKER)
        wanted = QUEUES_PER_BROKER * len(self.brokers)
        wait_until(
            lambda: len(client_for(self.namesrv).queues(topic)) == wanted,
            timeout_s=15,
            message=f"route of {topic} with {wanted} queues",
        )
        return topic

    def queues(self, topic: str) -> list[MessageQueue]:
        return [MessageQueue(q.topic, q.broker, q.queue_id) for q in client_for(self.namesrv).queues(topic)]

    def produce(
        self,
        topic: str,
        count: int,
        *,
        start: int = 0,
        tags=lambda n: "even" if n % 2 == 0 else "odd",
        properties=lambda n: {},
    ) -> list[bytes]:
        """``count`` messages ``msg-<n>`` spread evenly over the topic's queues, with the property ``n`` and
        ``properties(n)``; returns their bodies."""
        queues = self.queues(topic)
        bodies = [f"msg-{n}".encode() for n in range(start, start + count)]
        per_queue: dict[MessageQueue, list[Message]] = {q: [] for q in queues}
        for i, body in enumerate(bodies):
            n = start + i
            per_queue[queues[i % len(queues)]].append(
                Message.create(topic, body, tags=tags(n), keys=f"k{n}", properties={"n": str(n), **properties(n)})
            )
        client = client_for(self.namesrv)
        client.write_queues(topic)  # the producer's route: a send to an explicit queue needs its broker address
        for queue, messages in per_queue.items():
            for i in range(0, len(messages), 500):
                client.producer.send_batch(messages[i : i + 500], queue=queue)
        return bodies


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    root: Path = tmp_path_factory.mktemp("spark-cluster")
    first = broker_process(root / "a", "broker-a").start()
    brokers = [first]
    try:
        brokers.append(broker_process(root / "b", "broker-b", namesrv=first.namesrv).start())
        config = ClientConfig(namesrv_addr=first.namesrv)
        admin = Admin(config).start()
        wait_until(lambda: len(admin.master_addrs()) == 2, timeout_s=15, message="both brokers registered")
        yield Cluster(first.namesrv, brokers, admin)
        admin.shutdown()
    finally:
        for broker in reversed(brokers):
            broker.stop()
