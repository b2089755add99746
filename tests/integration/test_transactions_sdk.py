"""Transactional messages with the PocketMQ SDK on remoting, against real processes.

One broker (embedded name server) with fast checks (first at 300 ms, then every 500 ms):

- commit: the message reaches consumers once; rollback: never; both forms (sync and asyncio);
- unknown, then the broker's check, then commit; a checker that raises is asked again and its next answer holds;
- a producer process killed inside its local transaction: another producer of the group (started after, with
  ``topics``) gets the checks and its commit delivers the message once;
- a late second ending (the client's commit after a check's rollback) changes nothing.

A second broker for the crash test: 100 half messages pending, ``kill -9``, restart; a new producer's checker
commits the even ones and rolls back the odd ones; each is resolved exactly once (committed ones delivered
once, rolled back ones never, no check after its answer).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from tests.integration.transaction_support import bodies, open_ended, wait_check_rounds

from pocketmq.client import (
    Admin,
    AsyncTransactionProducer,
    ClientConfig,
    LocalTransactionState,
    Message,
    ProducerOptions,
    PullConsumer,
    TransactionProducer,
)
from pocketmq.testing.processes import broker_process, wait_until
from pocketmq.testing.scrape import metric

FAST_CHECKS = [
    "--set",
    "transaction_timeout_ms=300",
    "--set",
    "transaction_check_interval_ms=500",
    "--metrics-port",
    "0",
]
HELPER = Path(__file__).with_name("transaction_sdk_client.py")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("tx-sdk"), "broker-tx", extra_args=FAST_CHECKS).start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture(scope="module")
def config(broker) -> ClientConfig:
    return ClientConfig(namesrv_addr=broker.namesrv)


def create_topic(config: ClientConfig, topic: str) -> None:
    with Admin(config) as admin:
        admin.create_topic(topic, queues=2)


def resolutions(broker, source: str, result: str) -> float:
    """How many endings from ``source`` (CLIENT or CHECK) had ``result`` on ``broker``."""
    return metric(broker, "pocketmq_transaction_resolutions_total", source=source, result=result)


class Checker:
    """A checker whose answers the test sets per body; remembers every question."""

    def __init__(self, answers: dict[str, LocalTransactionState] | None = None, raises: int = 0):
        self.answers = answers or {}
        self.asked: Counter = Counter()
        self.raises = raises
        self._lock = threading.Lock()

    def __call__(self, message) -> LocalTransactionState:
        body = message.body.decode()
        with self._lock:
            self.asked[body] += 1
            if self.raises:
                self.raises -= 1
                raise RuntimeError("database unavailable")
        return self.answers.get(body, LocalTransactionState.UNKNOWN)


def test_commit_and_rollback_sync(config, broker):
    create_topic(config, "tx_sync")
    checker = Checker()
    states = {"commit-1": LocalTransactionState.COMMIT, "rollback-1": LocalTransactionState.ROLLBACK}
    with TransactionProducer(
        config, ProducerOptions(group="tx-sync"), executor=lambda m, arg: states[arg], checker=checker
    ) as producer:
        for body in states:
            result = producer.send_in_transaction(Message.create("tx_sync", body), body)
            assert result.local_state is states[body] and result.transaction_id == result.msg_id
        wait_until(lambda: bodies(config, "tx_sync") == Counter({"commit-1": 1}), message="the commit visible")
        wait_check_rounds(broker, 3)  # nothing more appears, nothing is checked
    assert bodies(config, "tx_sync") == Counter({"commit-1": 1}) and not checker.asked


def test_commit_and_rollback_async(config):
    create_topic(config, "tx_async")

    async def execute(message, arg):
        await asyncio.sleep(0.01)
        return LocalTransactionState.COMMIT if arg else LocalTransactionState.ROLLBACK

    async def main():
        async with AsyncTransactionProducer(
            config, ProducerOptions(group="tx-async"), executor=execute, checker=Checker()
        ) as producer:
            for i in range(10):
                await producer.send_in_transaction(Message.create("tx_async", f"a-{i}"), i % 2 == 0)

    asyncio.run(main())
    expected = Counter({f"a-{i}": 1 for i in range(0, 10, 2)})
    wait_until(lambda: bodies(config, "tx_async") == expected, message="the commits visible")


def test_unknown_then_check_then_commit_and_a_raising_checker(config, broker):
    create_topic(config, "tx_check")
    checker = Checker({"later": LocalTransactionState.COMMIT, "flaky": LocalTransactionState.COMMIT}, raises=1)
    with open_ended(config, "tx-check", checker) as producer:
        producer.send_in_transaction(Message.create("tx_check", "later"))
        producer.send_in_transaction(Message.create("tx_check", "flaky"))
        assert bodies(config, "tx_check") == Counter()
        wait_until(
            lambda: bodies(config, "tx_check") == Counter({"later": 1, "flaky": 1}),
            timeout_s=20,
            message="both committed by checks",
        )
        asked = dict(checker.asked)
        wait_check_rounds(broker, 3)
        assert checker.asked == asked  # committed: no check after the answer
    assert sum(asked.values()) == 3  # one raised (answered UNKNOWN), so one message was asked twice


def test_a_crashed_producer_s_transaction_is_answered_by_another_producer_of_the_group(config, broker, tmp_path):
    create_topic(config, "tx_crash")
    helper = subprocess.Popen(
        [sys.executable, str(HELPER), broker.namesrv, "tx_crash", "tx-crash", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=broker.env,
    )
    try:
        line = helper.stdout.readline()
        assert line.startswith("HALF "), line + helper.stdout.read()
        transaction_id = line.split()[1]
    finally:
        helper.kill()
        helper.wait(10)
    checker = Checker({"crash-0": LocalTransactionState.COMMIT})
    with open_ended(config, "tx-crash", checker, topics=["tx_crash"]):
        wait_until(lambda: bodies(config, "tx_crash") == Counter({"crash-0": 1}), timeout_s=20, message="commit")
    assert checker.asked["crash-0"] >= 1
    with PullConsumer("tx-reader", config) as consumer:
        found = [
            m
            for q in consumer.fetch_queues("tx_crash")
            for m in (consumer.pull(q, 0, 10).messages or [])
            if m.body == b"crash-0"
        ]
    assert [m.uniq_key for m in found] == [transaction_id]


def test_a_late_ending_changes_nothing(config, broker):
    create_topic(config, "tx_late")
    checker = Checker({"late": LocalTransactionState.ROLLBACK})
    release = threading.Event()

    def execute(message, arg):
        release.wait(20)  # the check comes (and rolls back) while the local transaction still runs
        return LocalTransactionState.COMMIT

    rolled_back_by_checks = resolutions(broker, "CHECK", "ROLLBACK")
    late_endings = resolutions(broker, "CLIENT", "ALREADY_RESOLVED")
    with TransactionProducer(config, ProducerOptions(group="tx-late"), executor=execute, checker=checker) as producer:
        sender = threading.Thread(target=producer.send_in_transaction, args=(Message.create("tx_late", "late"),))
        sender.start()
        wait_until(
            lambda: resolutions(broker, "CHECK", "ROLLBACK") > rolled_back_by_checks,
            timeout_s=10,
            message="a check rolled back",
        )
        release.set()
        sender.join(10)
        assert not sender.is_alive()
        wait_until(
            lambda: resolutions(broker, "CLIENT", "ALREADY_RESOLVED") > late_endings,
            message="the late commit answered as ended already",
        )
    assert bodies(config, "tx_late") == Counter()  # the rollback held; the late commit was ignored


def test_kill_9_with_100_pending_half_messages_resolves_each_exactly_once(tmp_path):
    slow_first_check = [
        "--set",
        "transaction_timeout_ms=4000",
        "--set",
        "transaction_check_interval_ms=500",
        "--metrics-port",
        "0",
    ]
    proc = broker_process(tmp_path / "crash", "broker-crash", extra_args=slow_first_check).start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        create_topic(config, "tx_kill")
        with open_ended(config, "tx-kill") as producer:
            ids = [producer.send_in_transaction(Message.create("tx_kill", f"k-{i}")).transaction_id for i in range(100)]
        assert len(set(ids)) == 100
        proc.kill()
        proc.restart()
        config = ClientConfig(namesrv_addr=proc.namesrv)
        answers = {
            f"k-{i}": LocalTransactionState.COMMIT if i % 2 == 0 else LocalTransactionState.ROLLBACK for i in range(100)
        }
        checker = Checker(answers)
        with open_ended(config, "tx-kill", checker, topics=["tx_kill"]):
            wait_until(lambda: len(checker.asked) == 100, timeout_s=30, message="every pending message checked")
            expected = Counter({f"k-{i}": 1 for i in range(0, 100, 2)})
            wait_until(lambda: bodies(config, "tx_kill") == expected, timeout_s=20, message="the even ones committed")
            asked = dict(checker.asked)
            wait_check_rounds(proc, 3)
            assert checker.asked == asked and set(asked.values()) == {1}  # each answered once, never asked again
        assert bodies(config, "tx_kill") == expected
        assert "transactions_rebuilt" in proc.log_path.read_text()
    finally:
        proc.stop()
