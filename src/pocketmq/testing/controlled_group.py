"""A broker group under ``--controller`` as real processes, for the failover tests and benchmark
(docs/failover.md): a name server that forgets a dead broker fast, and brokers ``0..size-1`` of group
``group-f`` each with ``--controller`` on a running etcd, SYNC masters when elected, with a metrics port.

``running_group`` starts them and waits until the master acknowledges SYNC sends with every broker in its
in-sync set (an async context manager: a fixture's body). ``ControlledGroup`` starts them, finds the master (the broker whose SYNC send is acknowledged), reads the
group's keys from etcd (``keys``), and sends with raw SEND_MESSAGE (``send_code``: the reply's code, None when
the broker did not answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.cluster.controller import parse_endpoints
from pocketmq.common.errors import PocketMQError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import CLUSTER, COMMON_ARGS, fast_namesrv
from pocketmq.testing.polling import eventually
from pocketmq.testing.processes import PocketProcess, broker_process
from pocketmq.testing.raw_remoting import queue_messages, send

GROUP = "group-f"
TOPIC = "failover"
KEYS_TIMEOUT_S = 2.0  # one member's read of the group's keys
# a send stored on the master whatever its replication: SUCCESS (acknowledged), or not replicated in time
STORED = (ResponseCode.SUCCESS, ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT)


@dataclass
class ControlledGroup:
    root: Path
    endpoint: str  # etcd://HOST:PORT[,HOST:PORT...]
    size: int = 2
    # broker id -> the --controller it takes, when not ``endpoint`` (through a proxy of its own, to cut it alone)
    broker_endpoints: dict[int, str] = field(default_factory=dict)
    namesrv: PocketProcess | None = None
    brokers: list[PocketProcess] = field(default_factory=list)
    client: RemotingClient = field(default_factory=RemotingClient)

    def start(self) -> ControlledGroup:
        self.namesrv = fast_namesrv(self.root)
        for broker_id in range(self.size):
            self.brokers.append(
                broker_process(
                    self.root / f"b{broker_id}",
                    GROUP,
                    namesrv=self.namesrv.namesrv,
                    extra_args=[
                        *COMMON_ARGS,
                        *(
                            "--broker-id",
                            str(broker_id),
                            "--role",
                            "sync_master",
                            "--controller",
                            self.broker_endpoints.get(broker_id, self.endpoint),
                        ),
                        *("--metrics-port", "0"),
                    ],
                ).start()
            )
        return self

    async def close(self) -> None:
        await self.client.close()
        for proc in [*self.brokers, self.namesrv]:
            if proc is not None:
                proc.kill()

    def data_dir(self, broker_id: int) -> Path:
        return self.root / f"b{broker_id}" / "data"

    async def send_code(self, broker: PocketProcess, body: str, timeout_s: float = 3.0) -> int | None:
        try:
            return (await send(self.client, broker.remoting, TOPIC, body.encode(), timeout_s=timeout_s)).code
        except (PocketMQError, OSError):
            return None

    async def acked(self, broker: PocketProcess, body: str) -> bool:
        return await self.send_code(broker, body) == ResponseCode.SUCCESS

    async def stores(self, broker: PocketProcess, body: str, timeout_s: float = 3.0) -> bool:
        """Whether ``broker`` stored a send, acknowledged as replicated or not (a master without a slave)."""
        return await self.send_code(broker, body, timeout_s) in STORED

    async def bodies(self, broker: PocketProcess) -> list[str]:
        """The bodies of the topic's queue 0 on ``broker`` (a slave serves them too)."""
        return [m.body.decode() for m in await queue_messages(self.client, broker.remoting, TOPIC)]

    async def master(self, timeout_s: float = 30.0, *, among: list[PocketProcess] | None = None) -> PocketProcess:
        """The broker that acknowledges a SYNC send (a master with its slave in sync), waited for."""

        async def acking() -> PocketProcess | None:
            for broker in among or self.brokers:
                if await self.acked(broker, "probe"):
                    return broker
            return None

        return await eventually(acking, timeout_s, "a master acknowledging SYNC sends")

    async def keys(self) -> dict[str, object]:
        """The group's keys in etcd: ``epoch`` (int), ``master`` and ``in_sync`` (their JSON), absent when unset;
        read from the first endpoint that answers."""
        import aetcd

        prefix = f"/pocketmq/{CLUSTER}/{GROUP}/"
        endpoints = parse_endpoints(self.endpoint)
        for i, (host, port) in enumerate(endpoints):
            try:
                async with aetcd.Client(host=host, port=port) as etcd:
                    got = await asyncio.wait_for(etcd.get_prefix(prefix.encode()), KEYS_TIMEOUT_S)
                break
            except Exception:  # aetcd's errors, or no answer: the next member
                if i == len(endpoints) - 1:
                    raise
        found = {kv.key.decode()[len(prefix) :]: kv.value for kv in got}
        keys: dict[str, object] = {name: json.loads(found[name]) for name in ("master", "in_sync") if name in found}
        if "epoch" in found:
            keys["epoch"] = int(found["epoch"])
        return keys

    async def all_in_sync(self) -> bool:
        """Whether the master wrote every broker into the in-sync set (only those may take over)."""
        in_sync = (await self.keys()).get("in_sync")
        return isinstance(in_sync, dict) and in_sync["brokerIds"] == list(range(self.size))

    def epochs(self, broker_id: int) -> list[int]:
        """The replication epoch numbers in the broker's ``ha_epochs.json``."""
        path = self.data_dir(broker_id) / "ha_epochs.json"
        return [e["epoch"] for e in json.loads(path.read_text())["epochs"]] if path.exists() else []


@contextlib.asynccontextmanager
async def running_group(root: Path, endpoint: str, **kwargs) -> AsyncIterator[ControlledGroup]:
    """A started ``ControlledGroup`` (``kwargs`` are its fields), once its master acknowledges SYNC sends and every
    broker is in the in-sync set; closed on exit."""
    group = ControlledGroup(root, endpoint, **kwargs)
    try:
        group.start()
        await group.master()
        await eventually(group.all_in_sync, 15, "the in-sync set with every broker")
        yield group
    finally:
        await group.close()


def logged(broker: PocketProcess, event: str) -> list[str]:
    """The lines of ``broker``'s log that contain ``event`` (``event=failover_master``...)."""
    return [line for line in broker.log_path.read_text(errors="replace").splitlines() if event in line]
