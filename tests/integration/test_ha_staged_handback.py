"""Staged-POP registrations changed on a slave acting as master go back to the returning master (real processes,
docs/ha.md "The master takes its services back").

Group A = SYNC master + slave (acting master), group B = a master. Two topics staged [2] on A's master, four
messages each; the slave copies the registrations. kill -9 A's master; on the acting slave one topic is
unregistered and the other registered again as [1, 1, 1] with its stages restarted, and the slave pops its first two
stages (CKs escaped to B, acks following them). A's master restarts and takes both changes over its own
registrations: the first topic pops the plain way (all four at once), the second one message at a time, from
the third. Before, the master kept its own [2] for both (only registrations it lacked were added).
"""

from __future__ import annotations

import pytest
from tests.integration.test_ha_acting_master import GROUP, _last_match, ack, acting, call, replicated, send
from tests.integration.test_ha_metadata_sync import FAST, config_file, pop, same_file

from pocketmq.protocol.codes import REGISTER_POP_STAGES, UNREGISTER_POP_STAGES, ResponseCode
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import start_two_groups
from pocketmq.testing.polling import eventually

UNSTAGED = "handback-unstaged"
RESTAGED = "handback-restaged"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


async def _register(client: RemotingClient, addr: str, topic: str, body: bytes, code: int = REGISTER_POP_STAGES):
    reply = await call(client, addr, code, {"consumerGroup": GROUP, "topic": topic, "restartStages": "true"}, body)
    assert reply.code == ResponseCode.SUCCESS, reply.remark


async def test_registrations_changed_on_the_acting_slave_replace_the_returning_master_s(tmp_path):
    groups = start_two_groups(tmp_path, a_flags=tuple(FAST))
    master, slave = groups.a_master, groups.a_slave
    client = RemotingClient()
    try:
        await groups.ready([UNSTAGED, RESTAGED])
        for topic in (UNSTAGED, RESTAGED):
            for i in range(4):
                assert (await send(client, master.remoting, topic, b"%s-%d" % (topic.encode(), i))).code == 0
            await _register(client, master.remoting, topic, b'{"stageDefinitions": [2]}')
        await eventually(lambda: same_file(master, slave, "pop_stages.json", RESTAGED), 15, "stages copied")
        await eventually(lambda: replicated(client, master.remoting, slave.remoting), 10, "slave caught up")

        master.kill()
        await eventually(lambda: acting(client, slave.remoting, "true"), 15, "slave acting as master")
        await _register(client, slave.remoting, UNSTAGED, b"", UNREGISTER_POP_STAGES)
        await _register(client, slave.remoting, RESTAGED, b'{"stageDefinitions": [1, 1, 1]}')
        # the acting slave pops the staged topic stage by stage, its CKs escaped to B (before: the pop failed)
        for i in range(2):
            [msg] = await pop(client, slave.remoting, RESTAGED)
            assert msg.body == b"%s-%d" % (RESTAGED.encode(), i)
            assert await pop(client, slave.remoting, RESTAGED) == []  # its stage is in flight
            await ack(client, slave.remoting, msg)

        master.restart()
        stages = {entry["topic"]: entry for entry in config_file(master, "pop_stages.json")["popStageTable"]}
        assert UNSTAGED not in stages and stages[RESTAGED]["stageDefinitions"] == [1, 1, 1]
        assert len(await pop(client, master.remoting, UNSTAGED)) == 4  # plain POP: every message at once
        [next_one] = await pop(client, master.remoting, RESTAGED)  # stages of one message, after the slave's
        assert next_one.body == b"%s-2" % RESTAGED.encode()
        changed = _last_match(master, r"event=acting_services_taken_back .*pop_stages_changed=(\d+)")
        assert changed == ("2",), master.log_tail()
    finally:
        await client.close()
        groups.kill_all()
