"""``pocketmq serve --controller etcd://...``, real processes and a real etcd (docs/failover.md):

- ``kill -9`` of the master under SYNC sends: the in-sync slave takes over and takes sends, holding every
  acknowledged message; the old master comes back as its slave; ``pocketmq cluster`` and the metrics show the
  new epoch, master, in-sync set and lease, the election and the time without a master.
- Fencing by the controller's epoch: a master frozen (SIGSTOP) past its lease is deposed; once it runs again it
  serves no slave that knows the newer epoch, while the new master serves a slave that has not heard of it yet
  and tells it; the replication epochs carry etcd's numbers.
- A returning master that wrote records its slave lacked: it follows the new master, truncates them (logging the
  bytes dropped), and every message acknowledged under SYNC is still readable on both.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest

from pocketmq.common.errors import PocketMQError
from pocketmq.protocol.codes import HA_PULL_COMMIT_LOG, ResponseCode
from pocketmq.protocol.request_headers import HaPullRequestHeader
from pocketmq.testing.controlled_group import GROUP, ControlledGroup, logged, running_group
from pocketmq.testing.etcd import etcd_server
from pocketmq.testing.polling import eventually, wait_until
from pocketmq.testing.processes import PocketProcess, run_cli
from pocketmq.testing.raw_remoting import call
from pocketmq.testing.scrape import metric

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
etcd = pytest.fixture(etcd_server)


@pytest.fixture
async def group(tmp_path, etcd):
    """Two brokers under the controller, once the master acknowledges SYNC sends and both are in sync."""
    async with running_group(tmp_path, etcd.endpoint) as group:
        yield group


async def test_the_in_sync_slave_takes_over_after_kill_9_with_every_acked_message(group):
    master = await group.master()
    slave = group.brokers[1 - group.brokers.index(master)]
    acked = [f"m{i:03d}" for i in range(100) if await group.acked(master, f"m{i:03d}")]
    assert len(acked) == 100
    master.kill()
    killed_at = time.monotonic()

    await eventually(lambda: group.stores(slave, "after"), 15, "the slave takes sends as the new master")
    failover_s = time.monotonic() - killed_at
    assert failover_s < 8.0, f"failover took {failover_s:.1f}s"
    assert set(acked) <= set(await group.bodies(slave))

    # the old master comes back: it follows the new master, whose SYNC sends it acknowledges again
    master.start()
    await eventually(lambda: group.acked(slave, "back"), 30, "the old master follows the new one")
    assert set(acked) | {"back"} <= set(await group.bodies(master))

    # what the brokers know from etcd: `pocketmq cluster` and the metrics
    keys = await group.keys()
    new_id = 1 - group.brokers.index(master)
    assert metric(slave, "pocketmq_controller_epoch") == keys["epoch"]
    assert metric(slave, "pocketmq_controller_elections_won_total") == 1
    assert metric(slave, "pocketmq_controller_elections_total") >= 1
    assert 0 < metric(slave, "pocketmq_controller_masterless_seconds_total") < failover_s
    assert metric(slave, "pocketmq_controller_masterless") == 0

    def cluster_rows():
        done = run_cli("cluster", "--json", namesrv=group.namesrv.namesrv)
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        wanted = (keys["epoch"], f"{new_id}@{slave.remoting}", [0, 1])
        return len(rows) == 2 and all((r["epoch"], r["master"], r["in_sync"]) == wanted for r in rows) and rows

    rows = wait_until(cluster_rows, 20, "`pocketmq cluster` showing the new epoch, master and in-sync set")
    assert all(r["lease"] not in ("-", None) for r in rows)
    print(f"failover (kill -9 to the first stored send on the new master): {failover_s:.2f}s")


async def pull_naming_epoch(group: ControlledGroup, broker: PocketProcess, epoch: int) -> tuple[int, str | None]:
    """HA_PULL_COMMIT_LOG from the log's start, as a slave that knows ``epoch``: (reply code, the epoch the
    reply names); (-1, None) when the broker did not answer."""
    fields = HaPullRequestHeader.ext_fields(
        broker_name=GROUP, slave_addr="127.0.0.1:1", phys_offset=0, max_bytes=1024, controller_epoch=epoch
    )
    try:
        reply = await call(group.client, broker.remoting, HA_PULL_COMMIT_LOG, fields, timeout_s=10.0)
    except (PocketMQError, OSError):
        return -1, None
    return reply.code, reply.ext_fields.get("controllerEpoch")


async def test_a_deposed_master_serves_no_slave_of_the_newer_epoch(group):
    old = await group.master()
    new = group.brokers[1 - group.brokers.index(old)]
    old_id = group.brokers.index(old)
    epoch = (await group.keys())["epoch"]
    assert isinstance(epoch, int) and group.epochs(old_id)[-1] == epoch  # etcd's number, in the log too
    assert await pull_naming_epoch(group, old, epoch) == (ResponseCode.SUCCESS, str(epoch))
    acked = [f"a{i}" for i in range(20) if await group.acked(old, f"a{i}")]

    os.kill(old.pid, signal.SIGSTOP)  # frozen past its lease: it cannot step down, the slave is elected
    try:
        await eventually(lambda: group.stores(new, "new-master"), 20, "the slave taking over")
        # Its tenure's number: epoch + 1, or more when a starved machine made it miss a lease renewal and win
        # again (each tenure has its own number; the frozen master cannot campaign).
        new_epoch = (await group.keys())["epoch"]
        assert new_epoch > epoch
        # the new master serves a slave that has not read etcd since, and names its epoch: the slave learns it
        code, named = await pull_naming_epoch(group, new, epoch)
        assert code == ResponseCode.SUCCESS and int(named) >= new_epoch
        # a slave that knows the new epoch asks the frozen master: queued in its socket until it runs again
        asked = asyncio.ensure_future(pull_naming_epoch(group, old, int(named)))
        await asyncio.sleep(0.2)  # the request reaches the frozen process's socket (no state to poll: it is frozen)
    finally:
        os.kill(old.pid, signal.SIGCONT)
    code, _ = await asked
    # refused as deposed (NO_PERMISSION), or its ports closed first as it stepped down: never served
    assert code in (ResponseCode.NO_PERMISSION, -1)
    await eventually(lambda: group.acked(new, "rejoined"), 30, "the old master following the new one")
    assert set(acked) | {"new-master", "rejoined"} <= set(await group.bodies(old))
    assert group.epochs(old_id) == group.epochs(1 - old_id)
    since = group.epochs(old_id)[group.epochs(old_id).index(epoch) :]
    assert len(since) >= 2 and since == sorted(set(since))  # the old tenure, then the new master's


async def test_a_returning_master_truncates_what_its_slave_lacked(group):
    old = await group.master()
    slave = group.brokers[1 - group.brokers.index(old)]
    acked = [f"s{i}" for i in range(20) if await group.acked(old, f"s{i}")]
    assert len(acked) == 20

    os.kill(slave.pid, signal.SIGSTOP)  # still in the in-sync set, but receives nothing more
    try:
        # A pull the slave sent before it froze may be held by the master: the first record answers it (into
        # the frozen slave's socket). Once that send is answered (no ack within 1 s) no pull of the slave is
        # left on the master, so the records after it reach the slave no more.
        assert await group.send_code(old, "filler") == ResponseCode.FLUSH_SLAVE_TIMEOUT
        unacked = [asyncio.ensure_future(group.send_code(old, f"old-only-{i}" + "x" * 100)) for i in range(3)]

        async def stored_on_old():
            return {f"old-only-{i}" + "x" * 100 for i in range(3)} <= set(await group.bodies(old))

        await eventually(stored_on_old, 5, "the unreplicated records on the old master")
        old.kill()  # before its in-sync set drops the frozen slave (that takes the slave's lease, 2 s)
    finally:
        os.kill(slave.pid, signal.SIGCONT)
    assert all(code != ResponseCode.SUCCESS for code in await asyncio.gather(*unacked))

    await eventually(lambda: group.stores(slave, "taken-over"), 20, "the in-sync slave taking over")
    old.start()
    await eventually(lambda: logged(old, "event=ha_replica_truncated"), 20, "the old master cutting its log")
    dropped = int(logged(old, "event=ha_replica_truncated")[0].split("dropped_bytes=")[1].split()[0])
    assert 3 * 100 < dropped < 4 * 400  # the three unreplicated records (and the filler), nothing else
    await eventually(lambda: group.acked(slave, "followed"), 30, "the old master following the new one")
    on_new = await group.bodies(slave)
    assert set(acked) | {"taken-over", "followed"} <= set(on_new)
    assert not any(body.startswith("old-only") for body in on_new)
    assert await eventually(lambda: _same(group, old, on_new), 10, "the old master serving the new master's log")


async def _same(group: ControlledGroup, broker: PocketProcess, expected: list[str]) -> bool:
    return await group.bodies(broker) == expected
