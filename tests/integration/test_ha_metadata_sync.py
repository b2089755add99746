"""The service state in the metadata sync, real processes (docs/ha.md "Metadata"): a name server, group A = SYNC
master + slave (acting master, remote escape), group B = a master (where the acting slave escapes to).

1. On A's master: FIFO pop of message groups a (m0, m1) and b (m2), m2 acked, m0 stays in flight; a staged-POP
   registration (stages of 2) with its first stage popped; a staged consumer's stage offsets; a delay message
   delivered (the timer progress moves past it).
2. The slave's files pop_fifo.json, pop_stages.json, consumer_stage_offsets.json equal the master's, and its
   timer_progress.json has the master's progress (polled with a deadline: they come with the metadata sync).
3. kill -9 A's master, then kill -9 and restart the slave, which now starts from its copies: its timer rebuild
   starts at the master's progress (nothing read twice), and acting as master it keeps group a blocked behind
   m0 and b done; the master's FIFO receipt handle of m0 acks on it, then m1 comes; the staged topic hands out
   nothing while its first stage is in flight (the plain path would hand out m2 and m3), while a plain topic's
   pop through the slave works (its CK escaped to B), and the slave's /metrics show the election and the escape.
"""

from __future__ import annotations

import json
import time

import pytest
from tests.integration.remoting_calls import call, send
from tests.integration.test_ha_acting_master import GROUP, _last_match, ack, acting, at_least, replicated, sent_ok
from tests.integration.test_ha_acting_master import pop as pop_of_broker
from tests.integration.test_ha_ops import sample, scrape

from pocketmq.common import properties as props
from pocketmq.protocol.codes import REGISTER_POP_STAGES, UPDATE_STAGE_OFFSETS, ResponseCode
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import start_two_groups
from pocketmq.testing.polling import eventually

FIFO_TOPIC = "sync-fifo"
STAGED_TOPIC = "sync-staged"
PLAIN_TOPIC = "sync-plain"
DELAY_TOPIC = "sync-delay"
FAST = ["--set", "pop_state_persist_interval_ms=200", "--set", "offset_persist_interval_ms=200", "--metrics-port", "0"]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


async def pop(client: RemotingClient, addr: str, topic: str, *, fifo: bool = False):
    """A pop by GROUP from group A (master or acting slave), invisible for a minute."""
    return await pop_of_broker(client, addr, "group-a", topic, 60_000, fifo=fifo)


def config_file(proc, name: str):
    path = proc.workdir / "data" / "config" / name
    return json.loads(path.read_text()) if path.exists() else None


async def same_file(master, slave, name: str, must_have: str):
    on_master, on_slave = config_file(master, name), config_file(slave, name)
    return on_master is not None and must_have in json.dumps(on_master) and on_master == on_slave


async def timer_progress_copied(master, slave):
    on_master, on_slave = config_file(master, "timer_progress.json"), config_file(slave, "timer_progress.json")
    return on_master and on_slave and on_master["progressOffset"] == on_slave["progressOffset"] >= 2


async def test_the_slave_copies_the_service_state_and_acts_from_it(tmp_path):
    groups = start_two_groups(tmp_path, a_flags=tuple(FAST))
    master, slave = groups.a_master, groups.a_slave
    client = RemotingClient()
    try:
        await groups.ready([FIFO_TOPIC, STAGED_TOPIC, PLAIN_TOPIC, DELAY_TOPIC])
        assert await sent_ok(client, master.remoting, PLAIN_TOPIC, b"plain")

        # 1. state on the master
        for body, message_group in ((b"m0", "a"), (b"m1", "a"), (b"m2", "b")):
            sent = await send(client, master.remoting, FIFO_TOPIC, body, {props.SHARDING_KEY: message_group})
            assert sent.code == ResponseCode.SUCCESS, sent.remark
        for i in range(4):
            assert (await send(client, master.remoting, STAGED_TOPIC, b"s%d" % i)).code == ResponseCode.SUCCESS
        registered = await call(
            client,
            master.remoting,
            REGISTER_POP_STAGES,
            {"consumerGroup": GROUP, "topic": STAGED_TOPIC},
            b'{"stageDefinitions": [2]}',
        )
        assert registered.code == ResponseCode.SUCCESS, registered.remark
        assert sorted(m.body for m in await pop(client, master.remoting, STAGED_TOPIC)) == [b"s0", b"s1"]
        fifo = await pop(client, master.remoting, FIFO_TOPIC, fifo=True)
        assert [m.body for m in fifo] == [b"m0", b"m2"]
        await ack(client, master.remoting, fifo[1])
        stage_record = {"commitOffset": 2, "stageOffsets": [{"strategy": "s", "stageGroup": "g", "stageOffset": 1}]}
        stored = await call(
            client,
            master.remoting,
            UPDATE_STAGE_OFFSETS,
            {"consumerGroup": GROUP, "topic": STAGED_TOPIC, "queueId": 0},
            json.dumps(stage_record).encode(),
        )
        assert stored.code == ResponseCode.SUCCESS, stored.remark
        due = await send(
            client, master.remoting, DELAY_TOPIC, b"later", {props.TIMER_DELIVER_MS: str(int(time.time() * 1000) + 300)}
        )
        assert due.code == ResponseCode.SUCCESS, due.remark
        await eventually(lambda: at_least(client, master.remoting, DELAY_TOPIC, 1), 10, "delay message delivered")

        # 2. the slave's copies equal the master's
        await eventually(lambda: same_file(master, slave, "pop_fifo.json", '"flight": {"0"'), 15, "FIFO state copied")
        await eventually(lambda: same_file(master, slave, "pop_stages.json", STAGED_TOPIC), 15, "stages copied")
        await eventually(
            lambda: same_file(master, slave, "consumer_stage_offsets.json", '"commitOffset": 2'),
            15,
            "stage offsets copied",
        )
        await eventually(lambda: timer_progress_copied(master, slave), 15, "timer progress copied")
        await eventually(lambda: replicated(client, master.remoting, slave.remoting), 10, "slave caught up")
        progress = config_file(master, "timer_progress.json")["progressOffset"]

        # 3. the master goes away; the slave restarts from its copies and acts from them
        master.kill()
        slave.kill()
        slave.restart()
        assert _last_match(slave, r"event=timer_rebuilt from_offset=(\d+) records_read=(\d+)") == (str(progress), "0")
        await eventually(lambda: acting(client, slave.remoting, "true"), 15, "slave acting as master")
        assert await pop(client, slave.remoting, FIFO_TOPIC, fifo=True) == []  # a blocked behind m0, b done
        await ack(client, slave.remoting, fifo[0])  # the master's receipt handle
        assert [m.body for m in await pop(client, slave.remoting, FIFO_TOPIC, fifo=True)] == [b"m1"]
        assert await pop(client, slave.remoting, STAGED_TOPIC) == []  # stage 1 is in flight on the master's CK
        assert [m.body for m in await pop(client, slave.remoting, PLAIN_TOPIC)] == [b"plain"]  # escaped CK on B
        metrics = scrape(slave.metrics)  # the escape and the election, in the acting slave's metrics
        assert sample(metrics, "pocketmq_acting_master ") == 1
        assert sample(metrics, 'pocketmq_acting_master_changes_total{reason="master_gone",to="acting"}') == 1
        assert sample(metrics, 'pocketmq_escapes_total{kind="checkpoint",result="stored"}') == 1
    finally:
        await client.close()
        groups.kill_all()
