"""The seven attacks a raw socket could make on an open broker (docs/security.md, "What an open broker allows"),
each with the request fields a real client would send, so that it does what it says when access control is off
(tests/integration/test_acl_open.py) and is refused, changing nothing, when it is on (test_acl.py).

Each attack prepares its own victim (a topic, a group, a popped message: its own names, so the attacks of one
broker do not meet), sends its request from the ``attacker`` client, and looks with the ``trusted`` one whether
it did its harm: ``Outcome.harmed``. The name server attacks come last: UNREGISTER_BROKER takes the broker out of
every route until its next registration.
"""

from __future__ import annotations

import json
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tests.integration.remoting_calls import call, queue_messages, send
from tests.integration.test_ha_acting_master import ack_reply, pop

from pocketmq.auth.signature import Credentials
from pocketmq.broker.pop.checkpoint import AckRecord
from pocketmq.common import properties as props
from pocketmq.common.topic import ACK_TAG, TopicConfig, revive_topic
from pocketmq.protocol.codes import ESCAPE_PUT_MESSAGE, HA_PULL_COMMIT_LOG, RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.namesrv_headers import RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader
from pocketmq.protocol.properties_text import parse_properties_text, properties_text
from pocketmq.protocol.request_headers import EscapePutMessageRequestHeader, HaPullRequestHeader
from pocketmq.protocol.route import RegisterBrokerBody, create_topic_fields
from pocketmq.protocol.transport import RemotingClient

CLUSTER = "DefaultCluster"
FAKE_BROKER_ADDR = "127.0.0.1:1"  # where the forged registration sends producers: nothing listens


@dataclass
class Target:
    broker: object  # a started PocketProcess (pocketmq.testing.processes)
    trusted: RemotingClient  # prepares the victims and looks at them (a Super user when access control is on)
    attacker: RemotingClient

    @property
    def broker_name(self) -> str:
        return self.broker.args[self.broker.args.index("--broker-name") + 1]


@dataclass(frozen=True)
class Outcome:
    reply: RemotingCommand  # the attack's answer
    harmed: bool  # whether the victim shows the harm the attack aims at


async def attempt(
    attack: Callable[[Target], Awaitable[Outcome]],
    broker,
    trusted: Credentials | None = None,
    attacker: Credentials | None = None,
) -> Outcome:
    """``attack`` on ``broker`` from clients of their own, signing with ``trusted`` / ``attacker`` (None: not)."""
    trusted_client, attacker_client = RemotingClient(credentials=trusted), RemotingClient(credentials=attacker)
    try:
        return await attack(Target(broker, trusted_client, attacker_client))
    finally:
        await trusted_client.close()
        await attacker_client.close()


async def _expect(reply: RemotingCommand) -> RemotingCommand:
    assert reply.code == ResponseCode.SUCCESS, (reply.code, reply.remark)
    return reply


async def _topic_with(t: Target, topic: str, *bodies: bytes) -> None:
    addr = t.broker.remoting
    await _expect(
        await call(t.trusted, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_fields(TopicConfig(topic, 1, 1)))
    )
    for body in bodies:
        await _expect(await send(t.trusted, addr, topic, body))


async def delete_topic(t: Target) -> Outcome:
    """DELETE_TOPIC_IN_BROKER: the topic and its message are gone."""
    await _topic_with(t, "victim_deleted", b"kept")
    reply = await call(t.attacker, t.broker.remoting, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "victim_deleted"})
    return Outcome(reply, not await queue_messages(t.trusted, t.broker.remoting, "victim_deleted"))


async def _group_offset(client: RemotingClient, addr: str) -> int | None:
    reply = await call(
        client,
        addr,
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": "victim_group", "topic": "victim_offsets", "queueId": 0},
    )
    return int(reply.ext_fields["offset"]) if reply.code == ResponseCode.SUCCESS else None


async def consumer_offset(t: Target) -> Outcome:
    """UPDATE_CONSUMER_OFFSET: a group's offset jumps to the queue's end, past what it has not read yet (the
    broker refuses an offset past the end, so no further)."""
    addr = t.broker.remoting
    await _topic_with(t, "victim_offsets", b"read", b"unread", b"unread")
    fields = {"consumerGroup": "victim_group", "topic": "victim_offsets", "queueId": 0, "commitOffset": 1}
    await _expect(await call(t.trusted, addr, RequestCode.UPDATE_CONSUMER_OFFSET, fields))
    reply = await call(t.attacker, addr, RequestCode.UPDATE_CONSUMER_OFFSET, {**fields, "commitOffset": 3})
    return Outcome(reply, await _group_offset(t.trusted, addr) == 3)


async def broker_config(t: Target) -> Outcome:
    """UPDATE_BROKER_CONFIG: a setting changes (and would persist)."""
    addr = t.broker.remoting
    flipped = "false" if await _setting(t, "auto_create_topic_enable") == "true" else "true"
    body = properties_text({"autoCreateTopicEnable": flipped})  # RocketMQ's name, as its tools send it
    reply = await call(t.attacker, addr, RequestCode.UPDATE_BROKER_CONFIG, {}, body)
    return Outcome(reply, await _setting(t, "auto_create_topic_enable") == flipped)


async def _setting(t: Target, name: str) -> str | None:
    reply = await _expect(await call(t.trusted, t.broker.remoting, RequestCode.GET_BROKER_CONFIG))
    return parse_properties_text(reply.body).get(name)


async def commit_log(t: Target) -> Outcome:
    """HA_PULL_COMMIT_LOG posing as a slave: the commit log comes back, another topic's bodies included."""
    secret = b"secret-" + uuid.uuid4().hex.encode()
    await _topic_with(t, "victim_secrets", secret)
    # A pull serves only what is flushed (the secret may not be yet): pull on from where the last reply ended, as
    # a slave does; a held pull answers once new records are durable.
    stolen, deadline = b"", time.monotonic() + 10
    while True:
        fields = HaPullRequestHeader.ext_fields(
            broker_name=t.broker_name,
            broker_id=1,
            slave_addr="127.0.0.1:2",
            phys_offset=len(stolen),
            max_bytes=16 << 20,
            suspend_ms=1000,
        )
        reply = await call(t.attacker, t.broker.remoting, HA_PULL_COMMIT_LOG, fields)
        stolen += reply.body or b""
        if reply.code != ResponseCode.SUCCESS or secret in stolen or time.monotonic() > deadline:
            return Outcome(reply, secret in stolen)


async def forged_ack(t: Target) -> Outcome:
    """ESCAPE_PUT_MESSAGE of an ACK record into the revive topic for a message a victim popped and did not ack:
    its checkpoint closes, so the message is never redelivered (the victim's own ack finds its handle stale)."""
    addr = t.broker.remoting
    await _topic_with(t, "victim_pop", b"popped")
    [msg] = await pop(t.trusted, addr, t.broker_name, "victim_pop", 60_000, group="victim_pop_group")
    start, pop_time, _, revive_queue, _, broker_name, queue_id, offset = msg.properties[props.POP_CK].split(" ")
    record = AckRecord(
        "victim_pop", "victim_pop_group", int(queue_id), int(start), int(pop_time), broker_name, (int(offset),)
    )
    fields = EscapePutMessageRequestHeader.ext_fields(
        producer_group="attacker",
        topic=revive_topic(CLUSTER),
        queue_id=int(revive_queue),
        born_timestamp_ms=int(time.time() * 1000),
        properties=props.encode_properties({props.TAGS: ACK_TAG}),
        deadline_ms=int(time.time() * 1000) + 10_000,
    )
    reply = await call(t.attacker, addr, ESCAPE_PUT_MESSAGE, fields, record.to_json())
    own_ack = await ack_reply(t.trusted, addr, msg, group="victim_pop_group")
    return Outcome(reply, own_ack.code != ResponseCode.SUCCESS)


async def _route_brokers(t: Target, topic: str) -> set[str]:
    """The broker addresses of ``topic``'s route on the name server (empty: no route)."""
    reply = await call(
        t.trusted, t.broker.namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "autoCreate": "false"}
    )
    if reply.code != ResponseCode.SUCCESS:
        return set()
    return {addr for data in json.loads(reply.body)["brokerDatas"] for addr in data["brokerAddrs"].values()}


async def register_broker(t: Target) -> Outcome:
    """REGISTER_BROKER of a fake broker with a real topic (the one named after the broker, which it registered at
    its start): the topic's route sends producers to the fake broker too."""
    topic = t.broker_name
    body = RegisterBrokerBody(topics=(TopicConfig(topic, 1, 1),)).to_json()
    fields = RegisterBrokerRequestHeader.ext_fields(
        cluster_name=CLUSTER,
        broker_name="fake-broker",
        broker_addr=FAKE_BROKER_ADDR,
        broker_id=0,
        ha_server_addr=FAKE_BROKER_ADDR,
        compressed=False,
        body_crc32=zlib.crc32(body),
    )
    reply = await call(t.attacker, t.broker.namesrv, RequestCode.REGISTER_BROKER, fields, body)
    return Outcome(reply, FAKE_BROKER_ADDR in await _route_brokers(t, topic))


async def unregister_broker(t: Target) -> Outcome:
    """UNREGISTER_BROKER: the broker leaves every route (until it registers again). The name server (embedded:
    its log is the broker's) logs each unregistration before it answers; that line is the proof, since a
    registration the broker had already scheduled (the earlier attacks changed its topics) may put it back in
    the routes a moment after."""
    topic = t.broker_name
    assert t.broker.remoting in await _route_brokers(t, topic)
    before = _unregistrations(t)
    fields = UnRegisterBrokerRequestHeader.ext_fields(
        cluster_name=CLUSTER, broker_name=t.broker_name, broker_addr=t.broker.remoting, broker_id=0
    )
    reply = await call(t.attacker, t.broker.namesrv, RequestCode.UNREGISTER_BROKER, fields)
    return Outcome(reply, _unregistrations(t) > before)


def _unregistrations(t: Target) -> int:
    line = f"pocketmq.namesrv.server event=broker_unregistered cluster={CLUSTER} broker={t.broker_name} "
    return t.broker.log_path.read_text(errors="replace").count(line)


ATTACKS: list[Callable[[Target], Awaitable[Outcome]]] = [
    delete_topic,
    consumer_offset,
    broker_config,
    commit_log,
    forged_ack,
    register_broker,
    unregister_broker,  # last: the others need the broker's routes
]
