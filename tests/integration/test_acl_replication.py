"""Users and ACLs reach a slave with the next replication reply, not the next periodic metadata sync (real
processes, docs/security.md): with the periodic sync ten minutes apart, a user made on the master is accepted by
its slave, and refused there once deleted, each within two seconds."""

from __future__ import annotations

import json

import pytest
from tests.integration.remoting_calls import call
from tests.integration.test_acl_ha import ACCESS_CONTROL_ENV, ROOT, ROOT_SECRET
from tests.integration.test_ha_acting_master import replicated

from pocketmq.auth.signature import Credentials
from pocketmq.common.topic import TopicConfig
from pocketmq.protocol.codes import AUTH_CREATE_ACL, AUTH_CREATE_USER, AUTH_DELETE_USER, RequestCode, ResponseCode
from pocketmq.protocol.route import create_topic_fields
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import fast_namesrv, ha_broker
from pocketmq.testing.polling import eventually

pytestmark = pytest.mark.timeout(60)
TOPIC = "acl-replicated"
PROMPTLY_S = 2.0  # well within the 3 s of the default periodic sync, and 300 times less than the one set here
NO_PERIODIC_SYNC = ("--set", "ha_metadata_sync_interval_ms=600000")


async def test_a_slave_enforces_a_new_and_a_deleted_user_promptly(tmp_path, monkeypatch):
    for name, value in ACCESS_CONTROL_ENV.items():
        monkeypatch.setenv(name, value)
    namesrv = fast_namesrv(tmp_path)
    master = ha_broker(tmp_path, namesrv.namesrv, "m", "group-acl", 0, "async_master", *NO_PERIODIC_SYNC).start()
    slave = ha_broker(tmp_path, namesrv.namesrv, "s", "group-acl", 1, "slave", *NO_PERIODIC_SYNC).start()
    root = RemotingClient(credentials=Credentials(ROOT, ROOT_SECRET))
    alice = RemotingClient(credentials=Credentials("alice", "alice-secret"))

    async def alice_reads_on_slave() -> str:
        reply = await call(alice, slave.remoting, RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0})
        return "ok" if reply.code == ResponseCode.SUCCESS else reply.remark

    try:
        created = await call(
            root, master.remoting, RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_fields(TopicConfig(TOPIC, 1, 1))
        )
        assert created.code == ResponseCode.SUCCESS, created.remark
        await eventually(lambda: replicated(root, master.remoting, slave.remoting), 15, "the slave follows")
        assert "User:alice is not found" in await alice_reads_on_slave()

        user = {"username": "alice", "password": "alice-secret", "userType": "Normal", "userStatus": "enable"}
        acl = {
            "subject": "User:alice",
            "policies": [
                {
                    "policyType": "Custom",
                    "entries": [{"resource": f"Topic:{TOPIC}", "actions": ["Get"], "decision": "Allow"}],
                }
            ],
        }
        for code, fields, body in (
            (AUTH_CREATE_USER, {"username": "alice"}, user),
            (AUTH_CREATE_ACL, {"subject": "User:alice"}, acl),
        ):
            reply = await call(root, master.remoting, code, fields, json.dumps(body).encode())
            assert reply.code == ResponseCode.SUCCESS, reply.remark

        async def accepted() -> bool:
            return await alice_reads_on_slave() == "ok"

        await eventually(accepted, PROMPTLY_S, "the new user and ACL on the slave")

        deleted = await call(root, master.remoting, AUTH_DELETE_USER, {"username": "alice"})
        assert deleted.code == ResponseCode.SUCCESS, deleted.remark

        async def refused() -> bool:
            return "User:alice is not found" in await alice_reads_on_slave()

        await eventually(refused, PROMPTLY_S, "the deleted user refused by the slave")
    finally:
        await root.close()
        await alice.close()
        for proc in (slave, master, namesrv):
            proc.kill()
