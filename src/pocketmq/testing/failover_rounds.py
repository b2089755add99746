"""Failovers in a row under SYNC traffic, and the checker of what they must keep (docs/failover.md): the test
of repeated failovers and ``bench/failover.py`` run them.

``SyncTraffic`` sends SYNC messages one after another to whichever broker of a ``ControlledGroup`` takes them
and remembers those acknowledged (SUCCESS). ``failover_once`` waits until the master and all its slaves are in
sync and the master acknowledged ``ACKED_PER_ROUND`` more sends, ``kill -9``s the master, measures the time to the first send acknowledged by the new master (its
remaining slave follows it: a group of three), and starts the old master again. ``check_run`` then checks that
every acknowledged message is on every broker, that the epochs etcd granted went up at every failover, that
each epoch had one master (the brokers' logs name each epoch's master once; their replication epochs agree on
the tenure of each number), and that the epochs in the brokers' logs are etcd's numbers.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from pocketmq.protocol.codes import ResponseCode
from pocketmq.testing.controlled_group import TOPIC, ControlledGroup
from pocketmq.testing.polling import eventually
from pocketmq.testing.raw_remoting import queue_messages

FAILOVER_TIMEOUT_S = 30.0
ACKED_PER_ROUND = 20  # SYNC sends the master acknowledges between two failovers
RETRY_PAUSE_S = 0.05  # between sends refused by a broker that is not the master (pacing, not a wait for a state)
_MASTER_EVENT = re.compile(r"event=failover_master broker_id=(\d+) epoch=(\d+)")


@dataclass
class SyncTraffic:
    group: ControlledGroup
    acked: set[str] = field(default_factory=set)
    sent: int = 0
    codes: Counter[int | None] = field(default_factory=Counter)  # replies by code (None: no answer)
    _target: int = 0
    _task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        brokers = self.group.brokers
        while True:
            body = f"t{self.sent:07d}"
            self.sent += 1
            code = await self.group.send_code(brokers[self._target], body, timeout_s=2.0)
            self.codes[code] += 1
            if code == ResponseCode.SUCCESS:
                self.acked.add(body)
            elif code != ResponseCode.FLUSH_SLAVE_TIMEOUT:  # not the master (or gone): try the next broker
                self._target = (self._target + 1) % len(brokers)
                await asyncio.sleep(RETRY_PAUSE_S)


@dataclass(frozen=True)
class Failover:
    seconds: float  # kill -9 of the master to the first send acknowledged by the new one
    epoch: int  # the epoch etcd granted the new master
    master_id: int  # its --broker-id


async def failover_once(group: ControlledGroup, traffic: SyncTraffic | None = None) -> Failover:
    """One failover; with ``traffic``, once the master acknowledged ``ACKED_PER_ROUND`` more of its sends."""
    master = await group.master(FAILOVER_TIMEOUT_S)
    await eventually(group.all_in_sync, FAILOVER_TIMEOUT_S, "every broker in the in-sync set")
    if traffic is not None:
        wanted = len(traffic.acked) + ACKED_PER_ROUND
        await eventually(lambda: len(traffic.acked) >= wanted, FAILOVER_TIMEOUT_S, "sends acknowledged")
    epoch_before = (await group.keys())["epoch"]
    master.kill()
    killed_at = time.monotonic()
    others = [b for b in group.brokers if b is not master]
    new = await group.master(FAILOVER_TIMEOUT_S, among=others)
    seconds = time.monotonic() - killed_at
    keys = await group.keys()
    epoch, holder = keys["epoch"], keys.get("master")
    assert isinstance(epoch, int) and isinstance(epoch_before, int) and epoch > epoch_before, (epoch_before, epoch)
    assert isinstance(holder, dict) and holder["address"] == new.remoting, (holder, new.remoting)
    await asyncio.to_thread(master.start)  # the traffic goes on meanwhile
    return Failover(seconds, epoch, int(holder["brokerId"]))


async def check_run(group: ControlledGroup, failovers: list[Failover], acked: set[str]) -> None:
    """Assert what a run of failovers must keep (see the module's docstring)."""
    epochs = [f.epoch for f in failovers]
    assert epochs == sorted(set(epochs)), f"epochs not strictly increasing: {epochs}"
    await group.master(FAILOVER_TIMEOUT_S)
    await eventually(group.all_in_sync, FAILOVER_TIMEOUT_S, "every broker in the in-sync set")

    for broker in group.brokers:

        async def holds_acked(broker=broker) -> bool:
            bodies = {m.body.decode() for m in await queue_messages(group.client, broker.remoting, TOPIC)}
            return acked <= bodies

        await eventually(holds_acked, FAILOVER_TIMEOUT_S, f"every acknowledged message on {broker.remoting}")

    masters: dict[int, int] = {}  # epoch -> the broker that became its master, from every broker's log
    for broker_id, broker in enumerate(group.brokers):
        for match in _MASTER_EVENT.finditer(broker.log_path.read_text(errors="replace")):
            epoch = int(match.group(2))
            assert epoch not in masters, f"epoch {epoch}: masters {masters[epoch]} and {broker_id}"
            masters[epoch] = int(match.group(1))
    for failover in failovers:
        assert masters.get(failover.epoch) == failover.master_id, (failover, masters)

    tenures: dict[int, str] = {}  # replication epoch number -> tenure id, over every broker's ha_epochs.json
    for broker_id in range(len(group.brokers)):
        path = group.data_dir(broker_id) / "ha_epochs.json"
        for entry in json.loads(path.read_text())["epochs"]:
            assert tenures.setdefault(entry["epoch"], entry["tenureId"]) == entry["tenureId"], entry
    assert set(epochs) <= set(tenures), f"etcd's epochs {epochs} are not the log's {sorted(tenures)}"


async def failovers_in_a_row(
    group: ControlledGroup, count: int, report: Callable[[int, Failover], None] = lambda i, f: None
) -> tuple[list[Failover], SyncTraffic]:
    """Start ``group``, run ``count`` failovers under ``SyncTraffic`` (``report`` hears of each), then
    ``check_run``; the caller closes the group."""
    traffic = SyncTraffic(group)
    try:
        group.start()
        await group.master()
        traffic.start()
        failovers = []
        for i in range(count):
            failovers.append(await failover_once(group, traffic))
            report(i, failovers[-1])
        await traffic.stop()
        await check_run(group, failovers, traffic.acked)
        return failovers, traffic
    finally:
        await traffic.stop()
