"""What a SYNC master acknowledged holds after ``kill -9`` of it at any moment, real processes (docs/ha.md,
"Metadata" and "POP acks under SYNC replication").

Every scenario runs group A's brokers with the periodic metadata sync effectively off (once a minute), so
what reaches the slave in time can only have come with the replicated records:

- a topic created (and another one auto-created by its first send) right before 200 SYNC sends: ``kill -9``
  of A's master as soon as the last send is acknowledged; every message is read back from the slave at once,
  and through the name server's route;
- the official client pops 200 messages from A's master and acks the even ones; ``kill -9`` of A's master at
  once: through A's acting slave (its revive escapes the retry copies to B) exactly the 100 un-acked come back,
  none of the acked, and nothing of the topic is popped a second time from its queue (the slave's pop offset
  stands behind its master's CKs, not at the last metadata sync);
- acks made while A's slave is down answer SLAVE_NOT_AVAILABLE / FLUSH_SLAVE_TIMEOUT, not OK; after ``kill -9``
  of the master and a restart of the slave, exactly the messages without an OK ack come back.
"""

from __future__ import annotations

import json

import pytest
from tests.integration.remoting_calls import call, queue_messages, send
from tests.integration.test_ha_acting_master import GROUP, acting, official_receive, pop, pull

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.config import ClientConfig
from pocketmq.client.pull_consumer import AsyncPullConsumer
from pocketmq.common import properties as props
from pocketmq.common.errors import PocketMQError
from pocketmq.common.topic import TopicConfig, pop_retry_topic
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.route import create_topic_fields
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import GROUP_A, GROUP_B, start_two_groups
from pocketmq.testing.polling import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]
# A metadata sync only once a minute: the tests see what travels with the records, not what the timer brings.
RARE_METADATA_SYNC = ("--set", "ha_metadata_sync_interval_ms=60000")
COUNT = 200
INVISIBLE_S = 4  # the first client's: its messages come back that long after their pop


async def slave_bodies(client: RemotingClient, addr: str, topic: str) -> list[str]:
    return [m.body.decode() for m in await queue_messages(client, addr, topic)]


async def test_sync_sends_right_after_the_topic_was_created_are_readable_through_the_slave(tmp_path):
    groups = start_two_groups(tmp_path, a_flags=RARE_METADATA_SYNC)
    a0, a1 = groups.a_master, groups.a_slave
    client = RemotingClient()
    try:
        await groups.ready([])  # its probe topic is created after the slave's first metadata sync, too
        async with AsyncAdmin(ClientConfig(namesrv_addr=groups.ns)) as admin:
            await admin.create_topic("fresh-created", queues=1)
        sent = {"fresh-created": [f"c{i:03d}" for i in range(COUNT)], "fresh-auto": [f"a{i:02d}" for i in range(20)]}
        for topic, bodies in sent.items():  # "fresh-auto" does not exist before its first send creates it
            for body in bodies:
                reply = await send(client, a0.remoting, topic, body.encode())
                assert reply.code == ResponseCode.SUCCESS, (topic, body, reply.code, reply.remark)
        a0.kill()

        for topic, bodies in sent.items():  # the slave had them when the last send was acknowledged
            assert await slave_bodies(client, a1.remoting, topic) == bodies, topic
        for topic, bodies in sent.items():  # and through the route, once it holds A's slave only
            await eventually(lambda: _all_readable(groups.ns, topic, bodies), 15, f"{topic} readable through the route")
    finally:
        await client.close()
        groups.kill_all()


async def _all_readable(namesrv: str, topic: str, bodies: list[str]) -> bool:
    """Whether the SDK pull consumer reads exactly ``bodies`` from ``topic`` through the name server's route."""
    got: list[str] = []
    try:
        async with AsyncPullConsumer("failover-checker", ClientConfig(namesrv_addr=namesrv)) as consumer:
            for queue in await consumer.fetch_queues(topic):
                offset = 0
                while messages := (await consumer.pull(queue, offset, 32)).messages:
                    got += [m.body.decode() for m in messages]
                    offset = messages[-1].queue_offset + 1
    except PocketMQError:  # the route still names the dead master
        return False
    return sorted(got) == sorted(bodies)


async def test_acked_pops_never_come_back_after_kill_9_of_the_sync_master(tmp_path):
    topic = "failover-pop"
    groups = start_two_groups(tmp_path, a_flags=RARE_METADATA_SYNC)
    a0, a1, b0 = groups.a_master, groups.a_slave, groups.b_master
    client = RemotingClient()
    try:
        await groups.ready([])
        # On A only for now: the client's receives then all go to A's queue (an empty queue on B would hold
        # every other receive for its long-polling time).
        created = await call(
            client, a0.remoting, RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_fields(TopicConfig(topic, 1, 1))
        )
        assert created.code == ResponseCode.SUCCESS, created.remark
        bodies = [f"p{i:03d}" for i in range(COUNT)]
        for body in bodies:
            reply = await send(client, a0.remoting, topic, body.encode())
            assert reply.code == ResponseCode.SUCCESS, (body, reply.code, reply.remark)
        unacked = bodies[1::2]

        first = official_receive(tmp_path, a0.grpc, topic, COUNT, invisible_s=INVISIBLE_S, skip_ack=unacked)
        assert first["bodies"] == bodies and first["acked"] == bodies[::2], first
        a0.kill()  # every ack above returned OK: each is on the slave

        await eventually(lambda: acting(client, a1.remoting, "true"), 15, "A's slave acting as master")
        async with AsyncAdmin(ClientConfig(namesrv_addr=groups.ns)) as admin:
            assert await admin.create_topic(topic, queues=1) == [GROUP_B]  # B pops its retry topic beside it
        # A new client through B's route: A's queue through A's acting slave, the retry copies on B.
        again = official_receive(tmp_path, b0.grpc, topic, len(unacked), linger_s=2)
        assert again["bodies"] == unacked, sorted(set(again["bodies"]) ^ set(unacked))
        # Each came back through revive (attempt 2, or later if the master revived it before the kill).
        assert min(again["attempts"]) >= 2, again["received"]
    finally:
        await client.close()
        groups.kill_all()


async def ack_code(client: RemotingClient, addr: str, msg) -> int:
    extra = msg.properties[props.POP_CK]
    reply = await call(
        client,
        addr,
        RequestCode.ACK_MESSAGE,
        {
            "consumerGroup": GROUP,
            "topic": msg.topic,
            "queueId": msg.queue_id,
            "extraInfo": extra,
            "offset": extra.rsplit(" ", 1)[1],
        },
    )
    return reply.code


async def open_on(client: RemotingClient, addr: str, topic: str) -> int:
    """Messages of ``topic`` under open CKs of GROUP on the broker at ``addr`` (in flight or waiting to revive)."""
    reply = await call(client, addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP, "topic": topic})
    entries = json.loads(reply.body)["offsetTable"] if reply.code == ResponseCode.SUCCESS else []
    return sum(e["popInFlight"] + e["popWaitingToRevive"] for e in entries)


async def test_an_ack_is_ok_only_once_the_slave_has_it(tmp_path):
    """An ack the master stores while its slave is away answers SLAVE_NOT_AVAILABLE (or FLUSH_SLAVE_TIMEOUT), not
    OK: after the master's ``kill -9`` the returning slave does not have it, and that message comes back; every
    message whose ack was OK does not."""
    topic = "failover-ack"
    groups = start_two_groups(tmp_path, a_flags=RARE_METADATA_SYNC)
    a0, a1, b0 = groups.a_master, groups.a_slave, groups.b_master
    client = RemotingClient()
    try:
        await groups.ready([topic])
        for i in range(6):
            assert (await send(client, a0.remoting, topic, b"k%d" % i)).code == ResponseCode.SUCCESS
        popped = await pop(client, a0.remoting, GROUP_A, topic=topic, invisible_ms=3000)
        assert sorted(m.body for m in popped) == [b"k%d" % i for i in range(6)]
        for msg in popped[:2]:
            assert await ack_code(client, a0.remoting, msg) == ResponseCode.SUCCESS

        a1.kill()
        for msg in popped[2:4]:  # stored on the master, which says it is not on a slave
            assert await ack_code(client, a0.remoting, msg) in (
                ResponseCode.SLAVE_NOT_AVAILABLE,
                ResponseCode.FLUSH_SLAVE_TIMEOUT,
            )
        a0.kill()
        a1.restart()
        await eventually(lambda: acting(client, a1.remoting, "true"), 15, "A's slave acting as master")

        retry_topic = pop_retry_topic(GROUP, topic)
        expected = sorted(m.body for m in popped[2:])  # not acked OK: the 2 refused acks and the 2 never acked
        await eventually(
            lambda: _revived(client, a1.remoting, b0.remoting, topic, retry_topic, len(expected)),
            20,
            "the acting slave revived the CK",
        )
        assert sorted(m.body for m in await pull(client, b0.remoting, retry_topic)) == expected
    finally:
        await client.close()
        groups.kill_all()


async def _revived(client: RemotingClient, slave: str, other: str, topic: str, retry_topic: str, count: int) -> bool:
    return await open_on(client, slave, topic) == 0 and len(await pull(client, other, retry_topic)) >= count
