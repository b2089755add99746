"""Slave acting master with the escape bridge, real processes (docs/ha.md "Slave acting master").

A name server; group A = SYNC master + slave, both with ``--enable-slave-acting-master``, the slave with
``--enable-remote-escape``; group B = a master. One scenario in phases:

1. pop 6 messages from A's master (invisible 4 s), ack 3; send a delay message to A due ~9 s later;
2. kill -9 A's master: A's slave starts acting; the 3 un-acked messages come back as retry copies escaped to
   B's ``%RETRY%<group>_<topic>`` (popped from B with attempt 2), the acked ones do not; the delay message is
   delivered on time, into B's queue of its topic; POP through the acting slave: 6 messages of another topic,
   3 acked there: the CK is on B (3 in flight there), the acks followed it, the slave's offset moved; the
   official client (gRPC) receives and acks another topic through the slave;
3. kill -9 the acting slave and restart it: it acts again from its side file: no CK open, no timer pending, so
   nothing is revived or delivered twice;
4. restart A's master: it takes the services back (the slave logs it stops), appends the slave's progress
   (the ACK closing the revived CK, 1 tombstone, the consumer offsets), so its revive finds no open CK, its
   timer does not deliver the message again (a new delay message, due later, is the first and only one it
   delivers), and a pop of the topic popped on the slave finds nothing new.

A second scenario runs the slave without ``--enable-remote-escape``: its timer and revive are refused, nothing
reaches B, and the returning master delivers the delay message and revives the un-acked messages itself.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.integration.remoting_calls import call, send

from pocketmq.client.simple_consumer import messages_of_pop_reply
from pocketmq.common import properties as props
from pocketmq.common.record import decode_records
from pocketmq.common.topic import pop_retry_topic
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.request_headers import PopMessageRequestHeader
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import start_two_groups
from pocketmq.testing.polling import eventually

POP_TOPIC = "acting-pop"
LATE_TOPIC = "acting-pop-late"  # popped only from the acting slave
GRPC_TOPIC = "acting-pop-grpc"  # received only from the acting slave, by the official client
OFFICIAL_CLIENT = Path(__file__).with_name("receive_official_client.py")
DELAY_TOPIC = "acting-delay"
GROUP = "acting-readers"
INVISIBLE_MS = 4000
DELAY_MS = 9000
pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]


async def pop(
    client: RemotingClient,
    addr: str,
    broker_name: str,
    topic: str = POP_TOPIC,
    invisible_ms: int = INVISIBLE_MS,
    *,
    group: str = GROUP,
    fifo: bool = False,
    poll_ms: int = 0,
    max_count: int = 32,
):
    """POP_MESSAGE of every queue of ``topic``: the messages ([] when none is there)."""
    fields = PopMessageRequestHeader.ext_fields(
        consumer_group=group,
        topic=topic,
        queue_id=-1,
        max_msg_nums=max_count,
        invisible_time_ms=invisible_ms,
        poll_time_ms=poll_ms,
        born_time_ms=int(time.time() * 1000),
        init_mode=0,
        exp_type="TAG",
        exp="*",
        order=fifo,
    )
    reply = await call(client, addr, RequestCode.POP_MESSAGE, fields)
    if reply.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.POLLING_TIMEOUT):
        return []
    assert reply.code == ResponseCode.SUCCESS, (reply.code, reply.remark)
    return messages_of_pop_reply(reply, broker_name)


async def ack(client: RemotingClient, addr: str, msg, group: str = GROUP) -> None:
    reply = await ack_reply(client, addr, msg, group)
    assert reply.code == ResponseCode.SUCCESS, reply.remark


async def ack_reply(client: RemotingClient, addr: str, msg, group: str = GROUP):
    """ACK_MESSAGE of a popped message: the reply, whatever its code."""
    extra = msg.properties[props.POP_CK]
    return await call(
        client,
        addr,
        RequestCode.ACK_MESSAGE,
        {
            "consumerGroup": group,
            "topic": msg.topic,
            "queueId": msg.queue_id,
            "extraInfo": extra,
            "offset": extra.rsplit(" ", 1)[1],
        },
    )


async def pull(client: RemotingClient, addr: str, topic: str):
    reply = await call(
        client,
        addr,
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": "acting-checker",
            "topic": topic,
            "queueId": 0,
            "queueOffset": 0,
            "maxMsgNums": 64,
            "sysFlag": 2,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subscription": "*",
            "subVersion": 0,
        },
    )
    return decode_records(reply.body) if reply.code == ResponseCode.SUCCESS else []


async def runtime(client: RemotingClient, addr: str) -> dict:
    reply = await call(client, addr, RequestCode.GET_BROKER_RUNTIME_INFO, {})
    return json.loads(reply.body)["table"]


async def test_slave_acts_as_master_and_hands_back(tmp_path):
    groups = start_two_groups(tmp_path)
    master, slave, other = groups.a_master, groups.a_slave, groups.b_master
    client = RemotingClient()
    try:
        await groups.ready([POP_TOPIC, DELAY_TOPIC, LATE_TOPIC, GRPC_TOPIC])
        for i in range(6):
            assert (await send(client, master.remoting, POP_TOPIC, b"m%d" % i)).code == ResponseCode.SUCCESS
            assert (await send(client, master.remoting, LATE_TOPIC, b"l%d" % i)).code == ResponseCode.SUCCESS
            assert (await send(client, master.remoting, GRPC_TOPIC, b"g%d" % i)).code == ResponseCode.SUCCESS

        # 1. pop everything from A's master, ack half; a delay message due while the master will be down.
        popped = await pop(client, master.remoting, "group-a")
        assert sorted(m.body for m in popped) == [b"m%d" % i for i in range(6)]
        for msg in popped[::2]:
            await ack(client, master.remoting, msg)
        unacked = sorted(m.body for m in popped[1::2])
        due_ms = int(time.time() * 1000) + DELAY_MS
        delayed = await send(client, master.remoting, DELAY_TOPIC, b"later", {props.TIMER_DELIVER_MS: str(due_ms)})
        assert delayed.code == ResponseCode.SUCCESS, delayed.remark
        await eventually(lambda: replicated(client, master.remoting, slave.remoting), 10, "slave caught up")

        # 2. kill -9 A's master: the slave acts; un-acked messages come back through B, the delay is on time.
        master.kill()
        await eventually(lambda: acting(client, slave.remoting, "true"), 15, "slave acting as master")
        retry_topic = pop_retry_topic(GROUP, POP_TOPIC)
        copies = await eventually(lambda: at_least(client, other.remoting, retry_topic, 3), 20, "3 retry copies on B")
        assert sorted(m.body for m in copies) == unacked
        assert all(m.reconsume_times == 1 for m in copies)
        pop_time_ms = int(popped[0].properties[props.POP_CK].split(" ")[1])
        assert all(m.store_timestamp_ms >= pop_time_ms + INVISIBLE_MS for m in copies)  # after their invisible time
        repopped = await eventually(lambda: pop(client, other.remoting, "group-b"), 10, "pop of the copies from B")
        assert sorted(m.body for m in repopped) == unacked
        for msg in repopped:
            await ack(client, other.remoting, msg)
        landed = await eventually(lambda: at_least(client, other.remoting, DELAY_TOPIC, 1), 20, "delay message on B")
        assert [m.body for m in landed] == [b"later"]
        assert due_ms <= landed[0].store_timestamp_ms <= due_ms + 2500, landed[0].store_timestamp_ms - due_ms
        assert not await pull(client, slave.remoting, retry_topic)  # the slave's store stayed a replica

        # POP through the acting slave: its CK escapes to B's revive topic, its acks follow it there; the
        # consumer offset moves on the slave.
        late = await pop(client, slave.remoting, "group-a", LATE_TOPIC, invisible_ms=120_000)
        assert sorted(m.body for m in late) == [b"l%d" % i for i in range(6)]
        for msg in late[::2]:
            await ack(client, slave.remoting, msg)
        assert await pop(client, slave.remoting, "group-a", LATE_TOPIC) == []
        assert await pop_in_flight(client, other.remoting, LATE_TOPIC) == 3  # B holds the CK, 3 acked
        assert await pop_in_flight(client, slave.remoting, LATE_TOPIC) == 0  # not on the replica
        escaped_before = int((await runtime(client, slave.remoting))["escapedTotal"])
        official = official_receive(tmp_path, slave.grpc, GRPC_TOPIC, 6)  # gRPC Receive + Ack on the slave
        assert (official["bodies"], official["attempts"]) == ([f"g{i}" for i in range(6)], [1])
        # at least one CK and 6 acks escaped to B, where no message is in flight: every ack reached its CK
        assert int((await runtime(client, slave.remoting))["escapedTotal"]) - escaped_before >= 7
        assert await pop_in_flight(client, other.remoting, GRPC_TOPIC) == 0

        # 3. a restarted acting slave does not repeat its work (the side file); its pop offsets are on disk.
        offsets_file = tmp_path / "a1" / "data" / "config" / "consumer_offsets.json"
        await eventually(lambda: _file_has(offsets_file, LATE_TOPIC), 10, "the slave's pop offsets persisted")
        slave.kill()
        slave.restart()
        await eventually(lambda: acting(client, slave.remoting, "true"), 15, "restarted slave acting again")
        started = _last_match(slave, r"event=acting_services_started open_cks=(\d+) pending_timers=(\d+)")
        assert started == ("0", "0"), slave.log_tail()

        # 4. the master returns and takes revive and the timer back.
        master.restart()
        await eventually(lambda: acting(client, slave.remoting, "false"), 15, "slave stopped acting")
        assert (
            "event=acting_master_stopped" in slave.log_path.read_text()
            and "reason=master_handover" in slave.log_path.read_text()
        )
        log_text = master.log_path.read_text()
        taken_back = r"event=acting_services_taken_back slave=group-a/1 acks=1 timers=1 offsets_moved=[1-9]"
        assert re.search(taken_back, log_text)
        assert _last_match(master, r"event=pop_started revive_queues=\d+ open_cks=(\d+)") == ("0",)
        assert await pop(client, master.remoting, "group-a", LATE_TOPIC) == []  # it took the slave's offsets
        probe_due = int(time.time() * 1000) + 1000
        probe = await send(client, master.remoting, DELAY_TOPIC, b"probe", {props.TIMER_DELIVER_MS: str(probe_due)})
        # stored either way (the slave may not follow the restarted SYNC master yet)
        assert probe.code in (
            ResponseCode.SUCCESS,
            ResponseCode.SLAVE_NOT_AVAILABLE,
            ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ), probe.remark
        on_a = await eventually(lambda: at_least(client, master.remoting, DELAY_TOPIC, 1), 15, "probe delivered on A")
        assert [m.body for m in on_a] == [b"probe"]  # "later" was not delivered a second time
        assert (
            await pull(client, other.remoting, DELAY_TOPIC)
            and len(await pull(client, other.remoting, DELAY_TOPIC)) == 1
        )
        assert slave.stop() == 0, slave.log_tail()  # a clean stop of a slave with its election running
    finally:
        await client.close()
        groups.kill_all()


def official_receive(tmp_path, endpoint: str, topic: str, count: int, **more) -> dict:
    """Run receive_official_client.py (``more``: further spec keys, e.g. ``skip_ack``, ``invisible_s``)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    spec = {"endpoint": endpoint, "topic": topic, "group": GROUP, "count": count, "deadline_s": 30, **more}
    out = subprocess.run(
        [sys.executable, str(OFFICIAL_CLIENT), json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, "HOME": str(home)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


async def pop_in_flight(client: RemotingClient, addr: str, topic: str) -> int:
    reply = await call(client, addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP, "topic": topic})
    return sum(e["popInFlight"] for e in json.loads(reply.body)["offsetTable"])


async def sent_ok(client: RemotingClient, addr: str, topic: str, body: bytes) -> bool:
    return (await send(client, addr, topic, body)).code == ResponseCode.SUCCESS


async def replicated(client: RemotingClient, master: str, slave: str) -> bool:
    """The slave has the master's commit log and its topics (metadata sync)."""
    keys = ("commitLogMaxOffset", "topicCount")
    on_master, on_slave = await runtime(client, master), await runtime(client, slave)
    return all(on_master[k] == on_slave[k] for k in keys)


async def acting(client: RemotingClient, addr: str, want: str) -> bool:
    return (await runtime(client, addr)).get("actingMaster") == want


async def at_least(client: RemotingClient, addr: str, topic: str, count: int):
    got = await pull(client, addr, topic)
    return got if len(got) >= count else None


async def _file_has(path, text: str) -> bool:
    return path.exists() and text in path.read_text()


def _last_match(proc, pattern: str):
    found = re.findall(pattern, proc.log_path.read_text())
    return (found[-1] if isinstance(found[-1], tuple) else (found[-1],)) if found else None


async def test_without_remote_escape_the_work_waits_for_the_master(tmp_path):
    """The slave acts but may not escape: the due delay message and the un-acked POP messages wait (nothing goes
    to B, nothing is lost) and the returning master does that work itself."""
    groups = start_two_groups(tmp_path, remote_escape=False)
    master, slave, other = groups.a_master, groups.a_slave, groups.b_master
    client = RemotingClient()
    try:
        await groups.ready([POP_TOPIC, DELAY_TOPIC])
        for i in range(4):
            assert (await send(client, master.remoting, POP_TOPIC, b"m%d" % i)).code == ResponseCode.SUCCESS
        popped = await pop(client, master.remoting, "group-a", invisible_ms=2000)
        assert len(popped) == 4
        for msg in popped[::2]:
            await ack(client, master.remoting, msg)
        due_ms = int(time.time() * 1000) + 4000
        delayed = await send(client, master.remoting, DELAY_TOPIC, b"later", {props.TIMER_DELIVER_MS: str(due_ms)})
        assert delayed.code == ResponseCode.SUCCESS, delayed.remark
        await eventually(lambda: replicated(client, master.remoting, slave.remoting), 10, "slave caught up")

        master.kill()
        await eventually(lambda: acting(client, slave.remoting, "true"), 15, "slave acting as master")
        # both the timer and revive tried to escape (and were refused) once their work was due
        for service in ("timer", "revive"):
            await eventually(
                lambda: _file_has(slave.log_path, f"event=escape_failed service={service} "),
                15,
                f"{service} refused to escape",
            )
        assert int((await runtime(client, slave.remoting))["escapedTotal"]) == 0
        retry_topic = pop_retry_topic(GROUP, POP_TOPIC)
        assert not await pull(client, other.remoting, DELAY_TOPIC) and not await pull(
            client, other.remoting, retry_topic
        )

        master.restart()
        await eventually(lambda: acting(client, slave.remoting, "false"), 15, "slave stopped acting")
        landed = await eventually(lambda: at_least(client, master.remoting, DELAY_TOPIC, 1), 15, "delay message on A")
        assert [m.body for m in landed] == [b"later"]
        copies = await eventually(lambda: at_least(client, master.remoting, retry_topic, 2), 15, "retry copies on A")
        assert sorted(m.body for m in copies) == sorted(m.body for m in popped[1::2])
    finally:
        await client.close()
        groups.kill_all()


FROZEN_TOPIC = "acting-frozen"


async def test_a_master_frozen_while_its_slave_acted_takes_the_slaves_progress_when_it_runs_again(tmp_path):
    """A master stopped (SIGSTOP) long enough for its slave to act, then running again, never restarts, so it
    never asked for what the slave did (fault-harness seed 326: acked messages handed out again). The slave
    offers its progress when it stops acting: the master's open CK acked on the slave is closed, and what was
    popped and acked on the slave is not handed out again."""
    groups = start_two_groups(tmp_path)
    master, slave = groups.a_master, groups.a_slave
    client = RemotingClient()
    try:
        await groups.ready([FROZEN_TOPIC])
        for i in range(6):
            assert (await send(client, master.remoting, FROZEN_TOPIC, b"f%d" % i)).code == ResponseCode.SUCCESS
        before = await pop(client, master.remoting, "group-a", FROZEN_TOPIC, invisible_ms=120_000, max_count=2)
        assert len(before) == 2  # popped on the master: its CK is in the replica too
        await eventually(lambda: replicated(client, master.remoting, slave.remoting), 10, "slave caught up")

        os.kill(master.pid, signal.SIGSTOP)
        try:
            await eventually(lambda: acting(client, slave.remoting, "true"), 15, "slave acting as master")
            for msg in before:  # acks of the master's CK (two ACK records): kept in the slave's side file
                await ack(client, slave.remoting, msg)
            during = await pop(client, slave.remoting, "group-a", FROZEN_TOPIC, invisible_ms=120_000)
            assert sorted(m.body for m in during) == [b"f%d" % i for i in range(2, 6)]
            for msg in during:  # their CK escaped to B: the acks follow it there
                await ack(client, slave.remoting, msg)
        finally:
            os.kill(master.pid, signal.SIGCONT)

        await eventually(lambda: acting(client, slave.remoting, "false"), 15, "slave stopped acting")
        await eventually(
            lambda: _file_has(master.log_path, "event=acting_services_taken_back slave=group-a/1 acks=2"),
            15,
            "the running master took the slave's progress",
        )
        assert "reason=master_back" in slave.log_path.read_text()  # it saw the master back: no restart, no handover
        assert await pop(client, master.remoting, "group-a", FROZEN_TOPIC) == []  # the slave's pops and acks hold
        assert await pop_in_flight(client, master.remoting, FROZEN_TOPIC) == 0  # its own CK closed by the slave's ack
    finally:
        await client.close()
        groups.kill_all()
