"""A replicated cluster with access control on (real processes, docs/security.md): brokers register, replicate,
escape and read each other's messages with the cluster's inner credentials; users made on a master reach its
slave; a client without credentials is refused by the slave too; A's master killed, its slave acts and the
un-acked messages of a POP come back through B (revive across brokers)."""

from __future__ import annotations

import json

import pytest
from tests.integration.test_ha_acting_master import GROUP, ack, acting, at_least, call, pop, replicated, send

from pocketmq.auth.signature import Credentials
from pocketmq.common.topic import pop_retry_topic
from pocketmq.protocol.codes import AUTH_CREATE_USER, AUTH_GET_USER, ResponseCode
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import start_two_groups
from pocketmq.testing.polling import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]
ROOT, ROOT_SECRET = "root", "root-secret-1"
TOPIC = "acl-ha-pop"
ACCESS_CONTROL_ENV = {
    "POCKETMQ_AUTHENTICATION_ENABLED": "true",
    "POCKETMQ_AUTHORIZATION_ENABLED": "true",
    "POCKETMQ_ACL_ROOT_USER": ROOT,
    "POCKETMQ_ACL_ROOT_PASSWORD": ROOT_SECRET,
    "POCKETMQ_INNER_ACCESS_KEY": "ha-inner",
    "POCKETMQ_INNER_SECRET_KEY": "ha-inner-secret",
}


async def test_a_replicated_cluster_with_access_control_fails_over_and_revives(tmp_path, monkeypatch):
    for name, value in ACCESS_CONTROL_ENV.items():
        monkeypatch.setenv(name, value)  # every process of the cluster, the name server too
    groups = start_two_groups(tmp_path)
    groups.access_key, groups.secret_key = ROOT, ROOT_SECRET
    master, slave, other = groups.a_master, groups.a_slave, groups.b_master
    client = RemotingClient(credentials=Credentials(ROOT, ROOT_SECRET))
    anonymous = RemotingClient()
    try:
        await groups.ready([TOPIC])  # registration and SYNC replication work with the inner credentials
        user = {"username": "alice", "password": "alice-secret", "userType": "Normal", "userStatus": "enable"}
        created = await call(
            client, master.remoting, AUTH_CREATE_USER, {"username": "alice"}, json.dumps(user).encode()
        )
        assert created.code == ResponseCode.SUCCESS, created.remark

        async def alice_on_slave() -> bool:
            reply = await call(client, slave.remoting, AUTH_GET_USER, {"username": "alice"})
            return reply.code == ResponseCode.SUCCESS and json.loads(reply.body)["username"] == "alice"

        await eventually(alice_on_slave, 10, "the user replicated to the slave")
        refused = await send(anonymous, slave.remoting, TOPIC, b"x")
        assert refused.code == ResponseCode.NO_PERMISSION, refused.remark

        for i in range(4):
            assert (await send(client, master.remoting, TOPIC, b"m%d" % i)).code == ResponseCode.SUCCESS
        popped = await pop(client, master.remoting, "group-a", TOPIC)
        assert len(popped) == 4
        for msg in popped[::2]:
            await ack(client, master.remoting, msg)
        unacked = sorted(m.body for m in popped[1::2])
        await eventually(lambda: replicated(client, master.remoting, slave.remoting), 10, "slave caught up")

        master.kill()
        await eventually(lambda: acting(client, slave.remoting, "true"), 15, "slave acting as master")
        retry_topic = pop_retry_topic(GROUP, TOPIC)
        copies = await eventually(lambda: at_least(client, other.remoting, retry_topic, 2), 20, "retry copies on B")
        assert sorted(m.body for m in copies) == unacked
    finally:
        await client.close()
        await anonymous.close()
        groups.kill_all()
