"""Operating transactions, real processes: bad END_TRANSACTIONs, ``topic describe``, ``transaction list|resume``,
``config set`` of the check settings, and the metrics.

One broker with fast checks (first at 300 ms, every 500 ms) and ``transaction_check_max=2``:

- END_TRANSACTIONs that ask for an answer (clients send them oneway; the codes are RocketMQ's): an unknown
  commit log offset, a wrong producer group, a forged transaction id, a bad ``commitOrRollback``; each changes
  nothing and is logged; an ending after the first one answers SUCCESS and stores nothing;
- a message with a check immunity of 10 minutes: ``topic describe`` shows it pending per queue; a message no
  producer answers: after two checks it is put aside: ``transaction list`` shows it (MAX_CHECKS, 2 checks), ``transaction resume`` puts it back (a second
  resume is refused), and a producer's checker commits it: delivered once;
- ``config set transaction_check_max`` applies at once and survives in ``config get``;
- ``/metrics``: pending half messages, checks, resolutions by source and result, discards, refusals.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter

import pytest
from tests.integration.transaction_support import bodies, open_ended

from pocketmq.client import (
    Admin,
    ClientConfig,
    LocalTransactionState,
    Message,
)
from pocketmq.common.message import parse_offset_msg_id
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.processes import broker_process, run_cli, wait_until
from pocketmq.testing.scrape import metric, wait_rounds

SETTINGS = [
    "--set",
    "transaction_timeout_ms=300",
    "--set",
    "transaction_check_interval_ms=500",
    "--set",
    "transaction_check_max=2",
    "--metrics-port",
    "0",
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("tx-admin"), "broker-txa", extra_args=SETTINGS).start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


def pocketmq(broker, *args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, "-n", broker.namesrv)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


async def end_transaction(addr: str, **fields) -> RemotingCommand:
    client = RemotingClient()
    try:
        base = {"producerGroup": "tx-admin", "commitOrRollback": 8, "msgId": "M"}
        return await client.invoke(addr, RemotingCommand.request(RequestCode.END_TRANSACTION, {**base, **fields}), 5)
    finally:
        await client.close()


def test_bad_endings_answer_rocketmq_s_codes_and_change_nothing(broker):
    config = ClientConfig(namesrv_addr=broker.namesrv)
    with Admin(config) as admin:
        admin.create_topic("tx_bad", queues=1)
    with open_ended(config, "tx-admin") as producer:
        result = producer.send_in_transaction(Message.create("tx_bad", "bad-1")).send_result
    _, phys = parse_offset_msg_id(result.offset_msg_id)
    offsets = {"tranStateTableOffset": result.queue_offset, "commitLogOffset": phys}

    def ending(**fields) -> RemotingCommand:
        return asyncio.run(end_transaction(broker.remoting, **{**offsets, **fields}))

    unknown = ending(commitLogOffset=phys + 1)
    assert (unknown.code, unknown.remark) == (ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
    group = ending(producerGroup="someone-else")
    assert (group.code, group.remark) == (ResponseCode.SYSTEM_ERROR, "The producer group wrong")
    forged = ending(transactionId="FORGED")
    assert (forged.code, forged.remark) == (ResponseCode.SYSTEM_ERROR, "The transaction id wrong")
    assert ending(commitOrRollback=5).code == ResponseCode.INVALID_PARAMETER
    assert ending(tranStateTableOffset=result.queue_offset + 7).code == ResponseCode.SYSTEM_ERROR
    assert bodies(config, "tx_bad") == Counter()
    assert ending(commitOrRollback=12).code == ResponseCode.SUCCESS  # the real rollback
    again = ending(commitOrRollback=8)  # a commit after it: ignored
    assert again.code == ResponseCode.SUCCESS and "ended already" in again.remark
    wait_rounds(broker, "pocketmq_transaction_check_round_seconds", 2)  # ended, so never checked nor delivered
    assert bodies(config, "tx_bad") == Counter()
    log = broker.log_path.read_text()
    for reason in ("NOT_FOUND", "PRODUCER_GROUP", "TRANSACTION_ID", "QUEUE_OFFSET"):
        assert f"event=transaction_end_refused reason={reason}" in log
    assert "event=end_transaction_bad_header" in log
    assert "reason=already_resolved" in log
    assert metric(broker, "pocketmq_transaction_end_refused_total", reason="PRODUCER_GROUP") == 1
    assert metric(broker, "pocketmq_transaction_resolutions_total", source="CLIENT", result="ALREADY_RESOLVED") == 1


def test_describe_list_resume_and_commit_after_resume(broker):
    config = ClientConfig(namesrv_addr=broker.namesrv)
    for topic in ("tx_ops", "tx_waiting"):
        created = pocketmq(broker, "topic", "create", topic, "--queues", "2", "--type", "transaction")
        assert created.returncode == 0, created.stderr
    with open_ended(config, "tx-ops") as producer:
        # a check immunity of 10 minutes: this one stays pending while the CLI looks
        immune = Message.create("tx_waiting", "waiting-1", properties={"CHECK_IMMUNITY_TIME_IN_SECONDS": "600"})
        waiting = producer.send_in_transaction(immune)
        sent = producer.send_in_transaction(Message.create("tx_ops", "ops-1"))
        rows = json_lines(pocketmq(broker, "topic", "describe", "tx_waiting", "--json").stdout)
        assert {r["queue_id"]: r["half_pending"] for r in rows} == {
            q: int(q == waiting.send_result.queue_id) for q in (0, 1)
        }
        table = pocketmq(broker, "topic", "describe", "tx_waiting").stdout
        assert "HALF_PENDING" in table.splitlines()[0] and "1 half message(s) waiting" in table
        assert metric(broker, "pocketmq_transaction_half_pending", topic="tx_waiting") == 1

        def put_aside() -> list[dict]:
            listed = json_lines(pocketmq(broker, "transaction", "list", "--json").stdout)
            return [r for r in listed if r["topic"] == "tx_ops"]

        [aside] = wait_until(put_aside, timeout_s=20, message="the unanswered message put aside")
    assert (aside["transaction_id"], aside["reason"], aside["checks"], aside["producer_group"]) == (
        sent.transaction_id,
        "MAX_CHECKS",
        2,
        "tx-ops",
    )
    assert "HALF_PENDING" not in pocketmq(broker, "topic", "describe", "tx_ops").stdout
    assert metric(broker, "pocketmq_transaction_discards_total", reason="MAX_CHECKS") >= 1
    assert metric(broker, "pocketmq_transaction_checks_total", result="sent") >= 2

    checker_answers: list[str] = []

    def commit(message) -> LocalTransactionState:
        checker_answers.append(message.body.decode())
        return LocalTransactionState.COMMIT

    with open_ended(config, "tx-ops", commit, topics=["tx_ops"]):
        resumed = pocketmq(broker, "transaction", "resume", "--id", aside["id"], "--json")
        assert resumed.returncode == 0, resumed.stderr + resumed.stdout
        assert json_lines(resumed.stdout)[0]["resumed"] is True
        twice = pocketmq(broker, "transaction", "resume", "--id", aside["id"])
        assert twice.returncode == 1 and "put back already" in twice.stdout
        wait_until(lambda: bodies(config, "tx_ops") == Counter({"ops-1": 1}), timeout_s=20, message="committed")
    assert checker_answers == ["ops-1"]
    assert metric(broker, "pocketmq_transaction_resolutions_total", source="CHECK", result="COMMIT") == 1


def test_check_settings_change_at_run_time(broker):
    for key, value in (("transaction_check_max", "4"), ("transactionTimeOut", "250")):
        changed = pocketmq(broker, "config", "set", key, value)
        assert changed.returncode == 0, changed.stderr
    values = {
        row["key"]: (row["value"], row["dynamic"])
        for row in json_lines(pocketmq(broker, "config", "get", "--json").stdout)
    }
    assert values["transaction_check_max"] == ("4", True) and values["transaction_timeout_ms"] == ("250", True)
    assert pocketmq(broker, "config", "set", "transaction_check_max", "0").returncode == 1
