"""A diverged slave cuts its log back to what it shares with its new master, by itself (real processes).

Failover by hand: X is the SYNC master and Y its slave; both hold the acknowledged messages. Y dies and X
stores two more (answered SLAVE_NOT_AVAILABLE: on X only), which a consumer group commits. X stops; Y is
started as the group's master (its new tenure begins at its log's end) and takes a message; X comes back as
Y's slave. X's log went on where Y's did not, so X compares epochs, cuts its two unreplicated records (logging
the bytes dropped), and then replicates Y's log: both serve the same messages and SYNC sends are acknowledged
by X again. The group's offset on X, which counted the dropped records, is set back to the cut, so a consumer
reading through X does not skip Y's messages stored there.

The second case: Y's data directory is restored from a copy older than a send X confirmed as replicated, and
Y is made master: X refuses to cut what a producer was told is on two brokers, and keeps it.

Corrupt tails (bytes overwritten while a broker was stopped cleanly, so recovery keeps them in place): a slave
whose own last records were hit cuts them and copies them again; a master whose last records were hit takes
its slave, which holds the good copies, back as it is.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass

import pytest
from tests.integration.test_ha_replication import GROUP, TOPIC, _logged, broker, pull_bodies, send

from pocketmq.common.message import parse_offset_msg_id
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.chaos.corruption import corrupt_tail
from pocketmq.testing.polling import eventually
from pocketmq.testing.processes import PocketProcess, namesrv_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


@dataclass
class Pair:
    namesrv: str
    x: PocketProcess
    y: PocketProcess
    procs: list[PocketProcess]  # killed at the end, with those a test adds
    client: RemotingClient


@pytest.fixture
async def pair(tmp_path):
    """A name server, X = SYNC master and Y = its slave, once a SYNC send to X was acknowledged by Y (a probe
    answered SLAVE_NOT_AVAILABLE before Y followed is stored too: the tests read logs back, never assume them)."""
    namesrv = namesrv_process(tmp_path / "ns").start()
    procs = [namesrv]
    client = RemotingClient()
    try:
        procs.append(broker(tmp_path, namesrv.namesrv, "x", 0, "sync_master").start())
        procs.append(broker(tmp_path, namesrv.namesrv, "y", 1, "slave").start())
        await eventually(lambda: _sent_ok(client, procs[1].remoting, b"probe"), 15, "a SYNC send acknowledged by Y")
        yield Pair(namesrv.namesrv, procs[1], procs[2], procs, client)
    finally:
        await client.close()
        for proc in procs:
            proc.kill()


def _started(pair: Pair, tmp_path, workdir: str, broker_id: int, role: str) -> PocketProcess:
    proc = broker(tmp_path, pair.namesrv, workdir, broker_id, role).start()
    pair.procs.append(proc)
    return proc


async def test_a_former_master_with_unreplicated_records_truncates_them_and_follows_the_new_master(tmp_path, pair):
    x, y, client = pair.x, pair.y, pair.client
    for i in range(3):
        assert (await send(client, x.remoting, b"acked-%d" % i)).code == ResponseCode.SUCCESS
    # the consumer group and an offset of it reach Y with the metadata sync (the promoted Y keeps the group)
    assert (
        await _offset_call(client, x.remoting, RequestCode.UPDATE_CONSUMER_OFFSET, commitOffset=1)
    ).code == ResponseCode.SUCCESS
    await eventually(lambda: _offset_is(client, y.remoting, 1), 10, "the group's offset on Y")
    y.kill()
    for i in range(2):  # stored on X only: never acknowledged as replicated
        reply = await send(client, x.remoting, b"x-only-%d" % i + bytes(100))
        assert reply.code in (ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT)
    on_x = await pull_bodies(client, x.remoting)
    assert on_x[-2:] == [b"x-only-0" + bytes(100), b"x-only-1" + bytes(100)]
    committed = await _offset_call(client, x.remoting, RequestCode.UPDATE_CONSUMER_OFFSET, commitOffset=len(on_x))
    assert committed.code == ResponseCode.SUCCESS  # the group consumed everything on X, the x-only records too
    x.stop()  # a clean stop: its offsets are saved

    y_master = _started(pair, tmp_path, "y", 0, "sync_master")
    assert (await send(client, y_master.remoting, b"after-failover")).code == ResponseCode.SLAVE_NOT_AVAILABLE
    x_slave = _started(pair, tmp_path, "x", 1, "slave")

    await eventually(lambda: _logged(x_slave, "event=ha_replica_truncated"), 15, "X cutting its own log")
    line = next(ln for ln in x_slave.log_path.read_text().splitlines() if "event=ha_replica_truncated" in ln)
    dropped = int(line.split("dropped_bytes=")[1].split()[0])
    assert 2 * 100 < dropped < 2 * 400  # the two x-only records, nothing else
    await eventually(lambda: _sent_ok(client, y_master.remoting, b"followed"), 15, "SYNC sends acknowledged by X")
    on_y = await pull_bodies(client, y_master.remoting)
    assert await eventually(lambda: _bodies_are(client, x_slave.remoting, on_y), 10, "X serving Y's log")
    shared = on_y.index(b"after-failover")
    assert on_y[:shared] == on_x[:-2] and on_y[-1] == b"followed"  # X's log up to its two x-only records
    x_log = x_slave.log_path.read_text()
    assert "ha_replica_diverged" not in x_log and "event=timer_rebuilt_after_cut" in x_log
    offset = await _offset_call(client, x_slave.remoting, RequestCode.QUERY_CONSUMER_OFFSET)
    assert int(offset.ext_fields["offset"]) == shared, x_slave.log_tail(60)  # "after-failover" is not skipped
    # X keeps Y's epochs: Y's first tenure (X's, copied) and the one Y began when promoted
    y_epochs = json.loads((tmp_path / "y" / "data" / "ha_epochs.json").read_text())["epochs"]
    x_epochs = json.loads((tmp_path / "x" / "data" / "ha_epochs.json").read_text())["epochs"]
    assert x_epochs == y_epochs and len(y_epochs) == 2


async def test_a_cut_below_what_was_confirmed_is_refused_and_the_data_kept(tmp_path, pair):
    x, y, client = pair.x, pair.y, pair.client
    await eventually(lambda: _same_log(client, x.remoting, y.remoting), 10, "Y holding X's log")
    y.stop()
    shutil.copytree(tmp_path / "y" / "data", tmp_path / "y-older")
    y.restart()
    await eventually(lambda: _sent_ok(client, x.remoting, b"confirmed"), 15, "a SYNC send acknowledged by Y")
    on_x = await pull_bodies(client, x.remoting)
    x.stop()  # saves its confirmed offset
    y.stop()
    shutil.rmtree(tmp_path / "y" / "data")
    shutil.copytree(tmp_path / "y-older", tmp_path / "y" / "data")  # Y lost the confirmed send

    y_master = _started(pair, tmp_path, "y", 0, "sync_master")
    x_slave = _started(pair, tmp_path, "x", 1, "slave")
    await eventually(lambda: _logged(x_slave, "event=ha_replica_diverged"), 15, "X refusing the cut")
    x_log = x_slave.log_path.read_text()
    assert "not truncated" in x_log and "confirmed as replicated" in x_log
    assert "ha_replica_truncated" not in x_log
    assert await pull_bodies(client, x_slave.remoting) == on_x  # kept
    assert (await send(client, y_master.remoting, b"alone")).code == ResponseCode.SLAVE_NOT_AVAILABLE


async def _acked_then_tail_overwritten(pair: Pair, proc: PocketProcess, workdir) -> list[bytes]:
    """Three SYNC sends acknowledged, then ``proc`` stopped cleanly, its commit log overwritten from the second
    send's frame on (its header included, and whatever came after: the third, trace records), and ``proc``
    started again; returns the bodies X held before."""
    replies = [await send(pair.client, pair.x.remoting, b"acked-%d" % i) for i in range(3)]
    assert [r.code for r in replies] == [ResponseCode.SUCCESS] * 3
    on_x = await pull_bodies(pair.client, pair.x.remoting)
    proc.stop()
    _host, second = parse_offset_msg_id(replies[1].ext_fields["msgId"])
    hit = corrupt_tail(workdir / "data", 0, random.Random(7), from_phys_offset=second).hit
    assert {h.body for h in hit} >= {"acked-1", "acked-2"}
    proc.restart()
    return on_x


async def test_a_slave_whose_last_records_were_overwritten_cuts_them_and_copies_them_again(tmp_path, pair):
    x, y, client = pair.x, pair.y, pair.client
    on_x = await _acked_then_tail_overwritten(pair, y, tmp_path / "y")
    await eventually(lambda: _logged(y, "event=ha_replica_truncated"), 15, "Y cutting its corrupt tail")
    assert await eventually(lambda: _bodies_are(client, y.remoting, on_x), 10, "Y serving X's log again")
    await eventually(lambda: _sent_ok(client, x.remoting, b"followed"), 15, "SYNC sends acknowledged by Y")
    assert "ha_replica_diverged" not in y.log_path.read_text()


async def test_a_master_whose_last_records_were_overwritten_keeps_the_slave_that_holds_good_copies(tmp_path, pair):
    x, y, client = pair.x, pair.y, pair.client
    on_x = await _acked_then_tail_overwritten(pair, x, tmp_path / "x")
    await eventually(lambda: _sent_ok(client, x.remoting, b"after"), 15, "SYNC sends acknowledged by Y")
    on_y = await pull_bodies(client, y.remoting)
    # Y kept the good copies of what X lost (sends answered SLAVE_NOT_AVAILABLE while Y reconnected are stored)
    assert on_y[: len(on_x)] == on_x and set(on_y[len(on_x) :]) == {b"after"}
    assert "ha_replica_diverged" not in y.log_path.read_text() and "slave_refused" not in x.log_path.read_text()


async def _offset_call(client: RemotingClient, addr: str, code: int, **fields):
    return await client.invoke(
        addr, RemotingCommand.request(code, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, **fields}), 5.0
    )


async def _offset_is(client: RemotingClient, addr: str, offset: int) -> bool:
    reply = await _offset_call(client, addr, RequestCode.QUERY_CONSUMER_OFFSET, setZeroIfNotFound="false")
    return reply.code == ResponseCode.SUCCESS and int(reply.ext_fields["offset"]) == offset


async def _same_log(client: RemotingClient, master: str, slave: str) -> bool:
    return await pull_bodies(client, master) == await pull_bodies(client, slave)


async def _sent_ok(client: RemotingClient, addr: str, body: bytes) -> bool:
    return (await send(client, addr, body)).code == ResponseCode.SUCCESS


async def _bodies_are(client: RemotingClient, addr: str, bodies: list[bytes]) -> bool:
    return await pull_bodies(client, addr) == bodies
