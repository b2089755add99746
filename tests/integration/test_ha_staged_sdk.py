"""The SDK's staged POP consumer on a slave acting as master (real processes, docs/staged.md "On a slave
acting as master"): new messages of a staged queue, never popped before the master went away, are handed out by
the acting slave stage by stage.

Group A = SYNC master + slave (acting master, remote escape), group B = a master. Six messages in A's queue,
stages [2, 2]; a ``StagedSimpleConsumer`` receives and acks stage 0 from A's master. kill -9 of the master; the
consumer receives stage 1 from the acting slave (nothing of stage 2 while it is in flight), acks it; a consumer
started while the master is away registers on the acting slave and receives stage 2 with the right
``stage_of``. Before, the SDK popped only masters: the acting slave's queue was never asked.
"""

from __future__ import annotations

import json

import pytest
from tests.integration.test_ha_acting_master import acting, replicated
from tests.integration.test_ha_metadata_sync import FAST, config_file, same_file

from pocketmq.client import AsyncProducer, ClientConfig, Message
from pocketmq.client.staged_simple_consumer import AsyncStagedSimpleConsumer
from pocketmq.common.errors import PocketMQError
from pocketmq.common.message import MessageExt, MessageQueue
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import GROUP_A, start_two_groups
from pocketmq.testing.polling import eventually

TOPIC = "ha-staged-sdk"
GROUP = "ha-staged-sdk-readers"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def staged_consumer(ns: str) -> AsyncStagedSimpleConsumer:
    config = ClientConfig(namesrv_addr=ns, poll_name_server_interval_ms=300, request_timeout_s=1.0)
    return AsyncStagedSimpleConsumer(GROUP, {TOPIC: "*"}, [2, 2], config, await_duration_ms=200)


async def receive(consumer: AsyncStagedSimpleConsumer, count: int, what: str) -> list[MessageExt]:
    """``count`` messages (turn by turn over A and B, which has none); a receive from the dead master fails
    until the consumer's route shows it gone."""
    got: list[MessageExt] = []

    async def enough() -> bool:
        try:
            got.extend(await consumer.receive(4, 60_000))
        except PocketMQError:
            pass
        return len(got) >= count

    await eventually(enough, 20, what)
    assert len(got) == count, [m.body for m in got]
    return sorted(got, key=lambda m: m.queue_offset)


def consumer_offset_on(proc) -> int | None:
    table = (config_file(proc, "consumer_offsets.json") or {}).get("offsetTable", {})
    return table.get(f"{TOPIC}@{GROUP}", {}).get("0")


async def test_the_acting_slave_hands_out_new_messages_stage_by_stage(tmp_path):
    groups = start_two_groups(tmp_path, a_flags=tuple(FAST))
    master, slave = groups.a_master, groups.a_slave
    client = RemotingClient()
    first = staged_consumer(groups.ns)
    late = staged_consumer(groups.ns)
    try:
        await groups.ready([TOPIC])
        async with AsyncProducer(ClientConfig(namesrv_addr=groups.ns)) as producer:
            await producer.instance.route(TOPIC)  # a send to a given queue needs its route
            for i in range(6):
                await producer.send(Message.create(TOPIC, str(i)), queue=MessageQueue(TOPIC, GROUP_A, 0))
        await first.start()
        stage0 = await receive(first, 2, "stage 0 from A's master")
        assert [(m.body, first.stage_of(m)) for m in stage0] == [(b"0", 0), (b"1", 0)]
        for msg in stage0:
            await first.ack(msg)
        await eventually(lambda: same_file(master, slave, "pop_stages.json", TOPIC), 15, "stages copied")
        await eventually(lambda: replicated(client, master.remoting, slave.remoting), 10, "slave caught up")
        await eventually(lambda: consumer_offset_on(slave) == 2, 10, "the pop offset copied")

        master.kill()
        await eventually(lambda: acting(client, slave.remoting, "true"), 15, "slave acting as master")
        stage1 = await receive(first, 2, "stage 1 from the acting slave")
        assert [(m.body, first.stage_of(m)) for m in stage1] == [(b"2", 1), (b"3", 1)]
        for _ in range(2):  # one turn on each group
            assert await first.receive(4, 60_000) == []  # stage 1 in flight: nothing of stage 2
        for msg in stage1:
            await first.ack(msg)

        await late.start()  # registers on the acting slave: it learns the queue's origin there
        stage2 = await receive(late, 2, "stage 2 from the acting slave")
        assert [(m.body, late.stage_of(m)) for m in stage2] == [(b"4", 2), (b"5", 2)]
        for msg in stage2:
            await late.ack(msg)
        stages = json.dumps(config_file(slave, "pop_stages.json"))
        assert TOPIC in stages  # still staged, with the master's origin
    finally:
        for consumer in (late, first):
            await consumer.shutdown()
        await client.close()
        groups.kill_all()
