"""Transactions across a failover, real processes (docs/transactions.md "High availability").

Group A = SYNC master + slave (acting master, remote escape), group B = a master; A checks late (its first check
at 60 s), B fast. A transactional SDK producer sends 12 half messages to A's queue: the first is committed and the
second rolled back at once, the other 10 are left open (UNKNOWN). Each half send is SEND_OK, so A's slave holds
it (SYNC). ``kill -9`` of A's master: the slave acts, escapes the 10 open half messages (not the ended two: their
op records reached it too) to B, which checks them; the producer's checker commits them there. Consumers see
each committed message exactly once (the one committed before the kill on A's queue through the slave, the
others on B's), the rolled back one never. An END_TRANSACTION to the acting slave is SLAVE_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

import pytest
from tests.integration.transaction_support import bodies, wait_check_rounds

from pocketmq.client import (
    Admin,
    ClientConfig,
    FunctionSelector,
    LocalTransactionState,
    Message,
    ProducerOptions,
    SendStatus,
    TransactionProducer,
)
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import GROUP_A, GROUP_B, start_two_groups
from pocketmq.testing.processes import wait_until

TOPIC = "tx-ha"
A_LATE_CHECKS = ("--set", "transaction_timeout_ms=60000")
B_FAST_CHECKS = (
    "--set",
    "transaction_timeout_ms=300",
    "--set",
    "transaction_check_interval_ms=500",
    "--metrics-port",
    "0",
)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]


async def end_transaction_reply(addr: str) -> RemotingCommand:
    client = RemotingClient()
    try:
        request = RemotingCommand.request(
            RequestCode.END_TRANSACTION,
            {
                "producerGroup": "tx-ha",
                "tranStateTableOffset": 0,
                "commitLogOffset": 0,
                "commitOrRollback": 8,
                "msgId": "X",
            },
        )
        return await client.invoke(addr, request, 5.0)
    finally:
        await client.close()


def test_the_acting_slave_escapes_open_half_messages_and_another_group_commits_them(tmp_path):
    groups = start_two_groups(tmp_path, a_flags=A_LATE_CHECKS, b_flags=B_FAST_CHECKS)
    try:
        asyncio.run(groups.ready([TOPIC]))
        config = ClientConfig(namesrv_addr=groups.ns)
        local = {"h-0": LocalTransactionState.COMMIT, "h-1": LocalTransactionState.ROLLBACK}
        asked: Counter = Counter()
        lock = threading.Lock()

        def check(message):
            with lock:
                asked[message.body.decode()] += 1
            return LocalTransactionState.COMMIT

        only_a = FunctionSelector(lambda queues, message: next(q for q in queues if q.broker_name == GROUP_A))
        with TransactionProducer(
            config,
            ProducerOptions(group="tx-ha"),
            executor=lambda m, arg: local.get(m.body.decode(), LocalTransactionState.UNKNOWN),
            checker=check,
            topics=[TOPIC],
            selector=only_a,
        ) as producer:
            results = [producer.send_in_transaction(Message.create(TOPIC, f"h-{i}")) for i in range(12)]
            assert {r.send_result.status for r in results} == {SendStatus.SEND_OK}  # on A's slave too (SYNC)
            assert {r.send_result.message_queue.broker_name for r in results} == {GROUP_A}
            wait_until(
                lambda: bodies(config, TOPIC, with_broker=True) == Counter({f"{GROUP_A}:h-0": 1}),
                message="h-0 committed on A",
            )
            # the op records of h-0 and h-1 reach the slave with the next replication round
            with Admin(config) as admin:
                wait_until(
                    lambda: (
                        admin.runtime_info(groups.a_slave.remoting)["commitLogMaxOffset"]
                        == admin.runtime_info(groups.a_master.remoting)["commitLogMaxOffset"]
                    ),
                    message="the slave caught up",
                )

            groups.a_master.kill()
            expected = Counter({f"{GROUP_A}:h-0": 1, **{f"{GROUP_B}:h-{i}": 1 for i in range(2, 12)}})
            wait_until(
                lambda: bodies(config, TOPIC, with_broker=True) == expected,
                timeout_s=40,
                message="the open ones committed on B",
            )
            assert set(asked) == {f"h-{i}" for i in range(2, 12)}  # the ended two were not escaped
            settled = dict(asked)
            wait_check_rounds(groups.b_master, 3)
            assert asked == settled
        assert bodies(config, TOPIC, with_broker=True) == expected

        reply = asyncio.run(end_transaction_reply(groups.a_slave.remoting))
        assert reply.code == ResponseCode.SLAVE_NOT_AVAILABLE
        log = groups.a_slave.log_path.read_text()
        assert "event=transactions_rebuilt" in log and "escaping=True" in log
    finally:
        groups.kill_all()
