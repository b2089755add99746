"""Background writes that fail, with real processes (docs/pop.md "When revive cannot write", docs/ha.md).

1. A slave acting as master with remote escape off holds more than a batch (64) of due CKs in its revive
   queues: every retry copy is refused. Revive backs off instead of spinning: the slave stays responsive, its
   CPU stays low, its event loop is never held for 100 ms, each CK is tried about once per backoff step. Once
   escape is switched on (a dynamic config change) every un-acked message reaches B's retry topic: none lost.
2. A group whose pop retry topic ``%RETRY%<group>_<topic>`` is longer than 127 characters: its messages go to
   its DLQ with the reason ``WRITE_REFUSED``, and another group's revive of the same topic goes on.
"""

from __future__ import annotations

import time

import pytest
from tests.integration.remoting_calls import queue_messages, send
from tests.integration.test_ha_acting_master import acting, at_least, pop, pull, replicated

from pocketmq.broker.pop.copies import DLQ_REASON, REASON_WRITE_REFUSED
from pocketmq.broker.pop.revive import REVIVE_BATCH_CKS
from pocketmq.client import AsyncAdmin, ClientConfig
from pocketmq.common.topic import dlq_topic, pop_retry_topic
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import start_two_groups
from pocketmq.testing.polling import eventually
from pocketmq.testing.processes import broker_process, process_cpu_s
from pocketmq.testing.scrape import metric

TOPIC = "write-faults"
CKS = (REVIVE_BATCH_CKS + 1) * 8  # pops go round robin over the 8 revive queues: more than a batch in each
# Long enough that the master revives none of them before it is killed (popping 520 one at a time takes seconds on
# a loaded machine): a CK the master revived is a copy on A, not one the acting slave has to escape to B.
POP_INVISIBLE_MS = 15_000
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


async def test_an_acting_slave_without_escape_backs_off_and_loses_nothing_once_escape_works(tmp_path):
    groups = start_two_groups(
        tmp_path,
        remote_escape=False,
        a_flags=("--metrics-port", "0", "--set", "pop_ck_rewrite_backoff_ms=" + ",".join(["1000"] * 30)),
    )
    master, slave, other = groups.a_master, groups.a_slave, groups.b_master
    client = RemotingClient()
    try:
        await groups.ready([TOPIC])
        for i in range(CKS):
            assert (await send(client, master.remoting, TOPIC, b"m%d" % i)).code == ResponseCode.SUCCESS
        for _ in range(CKS):
            assert (
                len(await pop(client, master.remoting, "", TOPIC, POP_INVISIBLE_MS, group="readers", max_count=1)) == 1
            )
        await eventually(lambda: replicated(client, master.remoting, slave.remoting), 15, "slave caught up")

        master.kill()
        await eventually(lambda: acting(client, slave.remoting, "true"), 15, "slave acting as master")
        await eventually(lambda: _blocked(slave), 20 + POP_INVISIBLE_MS / 1000, "revive blocked by refused escapes")
        cpu_before, failures_before = (
            process_cpu_s(slave.proc.pid),
            metric(slave, "pocketmq_background_write_failures_total", service="revive"),
        )
        window_start = time.monotonic()
        await eventually(lambda: _after(window_start, 3.0), 10, "a 3 s window")
        window_s = time.monotonic() - window_start
        cpu_s = process_cpu_s(slave.proc.pid) - cpu_before
        failures = metric(slave, "pocketmq_background_write_failures_total", service="revive") - failures_before
        # Spinning would hold a core (and the loop: /metrics would not answer). Backing off, each CK is tried
        # about once per 1 s step of its backoff.
        assert cpu_s < 0.5 * window_s, (cpu_s, window_s)
        assert failures <= CKS * (window_s + 1.5), (failures, CKS, window_s)
        assert metric(slave, "pocketmq_event_loop_max_busy_seconds") < 0.1
        assert metric(slave, "pocketmq_background_write_backoff_items", service="revive") > 0

        async with AsyncAdmin(ClientConfig(namesrv_addr=groups.ns)) as admin:
            await admin.update_broker_config(slave.remoting, {"enable_remote_escape": "true"})
        retry_topic = pop_retry_topic("readers", TOPIC)
        # each un-acked message once: escaped to B, or (had the master revived it before its kill) on A's slave
        copies = await eventually(
            lambda: _all_on(client, [other.remoting, slave.remoting], retry_topic, CKS),
            60,
            "every un-acked message escaped to B",
        )
        assert sorted(m.body for m in copies) == sorted(b"m%d" % i for i in range(CKS))
    finally:
        await client.close()
        groups.kill_all()


async def _blocked(proc) -> bool:
    return metric(proc, "pocketmq_background_passes_total", service="revive", result="blocked") > 0


async def _after(start: float, seconds: float) -> bool:
    return time.monotonic() - start >= seconds


async def _all_on(client, addrs: list[str], topic: str, count: int):
    """Every message of ``topic`` (one queue) on the brokers at ``addrs`` once there are ``count``."""
    messages = [m for addr in addrs for m in await queue_messages(client, addr, topic)]
    return messages if len(messages) >= count else None


async def test_a_retry_topic_name_too_long_does_not_block_another_groups_revive(tmp_path):
    topic = "long-" + "t" * 10
    long_group = "g" * 115  # %RETRY%<group>_<topic> is 138 characters, %DLQ%<group> 120
    broker = broker_process(
        tmp_path / "b", extra_args=["--set", "pop_revive_interval_ms=200", "--metrics-port", "0"]
    ).start()
    client = RemotingClient()
    try:
        async with AsyncAdmin(ClientConfig(namesrv_addr=broker.namesrv)) as admin:
            await admin.create_topic(topic, queues=1)
        for i in range(3):
            assert (await send(client, broker.remoting, topic, b"m%d" % i)).code == ResponseCode.SUCCESS
        for group in (long_group, "short"):
            assert len(await pop(client, broker.remoting, "", topic, 1_000, group=group)) == 3
        retried = await eventually(
            lambda: at_least(client, broker.remoting, pop_retry_topic("short", topic), 3),
            20,
            "the other group's retry copies",
        )
        assert sorted(m.body for m in retried) == [b"m0", b"m1", b"m2"]
        dead = await eventually(
            lambda: at_least(client, broker.remoting, dlq_topic(long_group), 3), 20, "the long group's dead letters"
        )
        assert {m.properties[DLQ_REASON] for m in dead} == {REASON_WRITE_REFUSED}
        assert metric(broker, "pocketmq_event_loop_max_busy_seconds") < 0.1
        assert "event=revive_copy_refused" in broker.log_path.read_text()
        assert await pull(client, broker.remoting, dlq_topic("short")) == []
    finally:
        await client.close()
        broker.kill()
