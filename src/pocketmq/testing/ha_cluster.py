"""Two broker groups as real processes, for HA tests (docs/ha.md): a name server that forgets a dead broker
fast, group A = a SYNC master and its slave, both with ``--enable-slave-acting-master`` (the slave also with
``--enable-remote-escape`` unless told otherwise), and group B = a master.

Intervals are short (revive every 200 ms, election and master lookup every 200 ms, metadata sync every
300 ms, registration every 500 ms, a dead broker expired after 2 s), so a scenario runs in seconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pocketmq.client import AsyncAdmin, AsyncProducer, ClientConfig, Message, SendStatus
from pocketmq.common.errors import PocketMQError
from pocketmq.common.message import MessageQueue
from pocketmq.testing.polling import eventually
from pocketmq.testing.processes import PocketProcess, broker_process, namesrv_process

CLUSTER = "ha"
GROUP_A, GROUP_B = "group-a", "group-b"
PROBE_TOPIC = "ha-probe"  # ready() sends here until A's slave acks a SYNC send
COMMON_ARGS = [
    "--cluster",
    CLUSTER,
    "--register-interval-ms",
    "500",
    "--set",
    "pop_revive_interval_ms=200",
    "--set",
    "ha_master_lookup_interval_ms=200",
    "--set",
    "ha_metadata_sync_interval_ms=300",
    "--set",
    "ha_slave_ack_timeout_ms=1000",
]


def fast_namesrv(root: Path) -> PocketProcess:
    """A started name server that expires a silent broker after 2 s."""
    config = root / "namesrv.toml"
    config.write_text("[namesrv]\nbroker_expire_ms = 2000\nscan_interval_ms = 200\n")
    return namesrv_process(root / "ns", extra_args=["--config", str(config)]).start()


def ha_broker(
    root: Path, namesrv: str, workdir: str, name: str, broker_id: int, role: str, *flags: str
) -> PocketProcess:
    """A broker of the cluster (not started) in ``root / workdir``; ``flags`` are more ``serve`` arguments."""
    return broker_process(
        root / workdir,
        name,
        namesrv=namesrv,
        extra_args=[*COMMON_ARGS, "--broker-id", str(broker_id), "--role", role, *flags],
    )


@dataclass
class TwoGroups:
    namesrv: PocketProcess
    a_master: PocketProcess
    a_slave: PocketProcess
    b_master: PocketProcess
    # what ready() signs with when access control is on (docs/security.md)
    access_key: str | None = None
    secret_key: str | None = None

    @property
    def ns(self) -> str:
        return self.namesrv.namesrv

    async def ready(self, topics: Iterable[str], timeout_s: float = 15.0) -> None:
        """Create ``topics`` (one queue each) on every master, then wait until a SYNC send to A's master is
        acknowledged by its slave (so the slave follows); the probe messages go to PROBE_TOPIC."""
        config = ClientConfig(namesrv_addr=self.ns, access_key=self.access_key, secret_key=self.secret_key)
        async with AsyncAdmin(config) as admin:
            for topic in (*topics, PROBE_TOPIC):
                await admin.create_topic(topic, queues=1)
        async with AsyncProducer(config) as producer:

            async def acknowledged() -> bool:
                try:
                    await producer.instance.route(PROBE_TOPIC, refresh=True)  # a send to a queue needs its route
                    sent = await producer.send(
                        Message.create(PROBE_TOPIC, b"probe"), queue=MessageQueue(PROBE_TOPIC, GROUP_A, 0)
                    )
                except PocketMQError:
                    return False  # the route has not reached the name server yet
                return sent.status is SendStatus.SEND_OK

            await eventually(acknowledged, timeout_s, "a SYNC send acknowledged by A's slave")

    def kill_all(self) -> None:
        for proc in (self.a_slave, self.a_master, self.b_master, self.namesrv):
            proc.kill()


def start_two_groups(
    root: Path, *, remote_escape: bool = True, a_flags: tuple[str, ...] = (), b_flags: tuple[str, ...] = ()
) -> TwoGroups:
    """Start the name server, A's master, A's slave and B's master (``a_flags``: more arguments for both of A's
    brokers, ``b_flags`` for B's)."""
    namesrv = fast_namesrv(root)
    ns = namesrv.namesrv
    started: list[PocketProcess] = [namesrv]
    try:
        a_master = ha_broker(
            root, ns, "a0", GROUP_A, 0, "sync_master", "--enable-slave-acting-master", *a_flags
        ).start()
        started.append(a_master)
        escape = ("--enable-remote-escape",) if remote_escape else ()
        a_slave = ha_broker(
            root, ns, "a1", GROUP_A, 1, "slave", "--enable-slave-acting-master", *escape, *a_flags
        ).start()
        started.append(a_slave)
        b_master = ha_broker(root, ns, "b0", GROUP_B, 0, "async_master", *b_flags).start()
    except BaseException:
        for proc in started:
            proc.kill()
        raise
    return TwoGroups(namesrv, a_master, a_slave, b_master)
