"""POP revive across brokers, real processes: a name server, broker A (master, stores the messages) and broker
B (master) whose revive queue holds CKs naming A (what the escape bridge of A's acting slave writes; seeded
into B's data directory with ``pocketmq.testing.escaped_checkpoints`` before B starts).

- A down: B's revive backs off, its breaker of A opens (logged), remote reads stay bounded, nothing is
  dead-lettered early; A back: the messages come back as retry copies on B.
- A never back, a short backoff table: dead-letter references on B, kept apart from ``%DLQ%<group>`` (which
  stays empty for its consumers) and listed by ``pocketmq dlq list`` with their reason; ``pocketmq dlq resend``
  says per entry that A is unreachable and exits 1; once A is back B writes the real messages into
  ``%DLQ%<group>`` by itself, and ``resend --to-topic`` delivers them to their topic on A.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from tests.integration.test_ha_e2e import dead_letters

from pocketmq.client import AsyncAdmin, AsyncProducer, ClientConfig, Message
from pocketmq.cluster.breaker import BreakerBoard
from pocketmq.cluster.namesrv_client import NamesrvClient
from pocketmq.cluster.remote_reader import RemoteMessageReader
from pocketmq.common.dead_letter_reference import DeadLetterReference
from pocketmq.common.read_result import ReadStatus
from pocketmq.ops.dead_letters import topic_messages
from pocketmq.protocol.transport import RemotingClient
from pocketmq.runtime.clock import SYSTEM_CLOCK
from pocketmq.testing.escaped_checkpoints import remote_checkpoints, seed_checkpoints
from pocketmq.testing.polling import eventually, wait_until
from pocketmq.testing.processes import broker_process, namesrv_process, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
CLUSTER = "rv"
TOPIC = "rv-orders"
GROUP = "rv-pop"
QUEUES = 2
COOL_DOWN_MS = 2_000


def b_args(*settings: str) -> list[str]:
    args = [
        "--cluster",
        CLUSTER,
        "--set",
        "pop_revive_interval_ms=200",
        "--set",
        "remote_read_timeout_ms=1000",
        "--set",
        f"breaker_cool_down_ms={COOL_DOWN_MS}",
        "--set",
        "remote_read_retry_unreachable_ms=1000",
    ]
    for setting in settings:
        args += ["--set", setting]
    return args


class Cluster:
    """The name server and broker A running, 6 messages in A's topic; B seeded with CKs for them."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.namesrv = namesrv_process(tmp_path / "ns").start()
        self.a = broker_process(
            tmp_path / "a", "rv-a", namesrv=self.namesrv.namesrv, extra_args=["--cluster", CLUSTER]
        ).start()
        self.b = None
        self.config = ClientConfig(namesrv_addr=self.namesrv.namesrv)
        self.sent: dict[tuple[int, int], bytes] = {}  # (queue id, queue offset) -> body
        self.remoting = RemotingClient()

    async def send_and_seed(self) -> None:
        async with AsyncAdmin(self.config) as admin:
            await admin.create_topic(TOPIC, queues=QUEUES)
        async with AsyncProducer(self.config) as producer:
            for i in range(6):
                result = await producer.send(
                    Message.create(TOPIC, b"order-%d" % i, keys=[f"k{i}"], properties={"origin": "a"})
                )
                self.sent[(result.queue_id, result.queue_offset)] = b"order-%d" % i
        offsets: dict[int, list[int]] = {}
        for queue_id, offset in sorted(self.sent):
            offsets.setdefault(queue_id, []).append(offset)
        cks = remote_checkpoints(TOPIC, GROUP, "rv-a", offsets, pop_time_ms=SYSTEM_CLOCK.now_ms(), invisible_ms=1000)
        await seed_checkpoints(self.tmp_path / "b" / "data", cluster_name=CLUSTER, broker_name="rv-b", cks=cks)

    def start_b(self, *settings: str) -> None:
        self.b = broker_process(
            self.tmp_path / "b", "rv-b", namesrv=self.namesrv.namesrv, extra_args=b_args(*settings)
        ).start()

    def b_log(self) -> str:
        return self.b.log_path.read_text(errors="replace")

    def reader(self, broker_name: str) -> RemoteMessageReader:
        return RemoteMessageReader(
            broker_name, NamesrvClient([self.namesrv.namesrv], self.remoting), self.remoting, breakers=BreakerBoard()
        )

    async def dead_letters(self, at_least: int = 0) -> list:
        return await dead_letters(self.namesrv.namesrv, GROUP, at_least)

    async def dlq_consumer_sees(self, at_least: int = 0) -> list | None:
        """What a consumer of B's ``%DLQ%<group>`` reads ([] while it has no route); None below ``at_least``."""
        async with AsyncAdmin(self.config) as admin:
            found = [m for _, m in await topic_messages(admin, f"%DLQ%{GROUP}", 100)]
        return found if len(found) >= at_least else None

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return run_cli(*args, "-n", self.namesrv.namesrv, timeout_s=60)

    async def close(self) -> None:
        await self.remoting.close()
        for proc in (self.b, self.a, self.namesrv):
            if proc is not None:
                proc.kill()


def count(pattern: str, text: str) -> int:
    return len(re.findall(pattern, text))


async def test_revive_backs_off_while_the_storing_broker_is_down_and_hands_back_when_it_returns(tmp_path):
    cluster = Cluster(tmp_path)
    try:
        await cluster.send_and_seed()
        cluster.a.kill()
        cluster.start_b("breaker_failure_threshold=1", "pop_ck_rewrite_backoff_ms=" + ",".join(["500"] * 30))
        wait_until(
            lambda: "event=breaker_state_changed broker=rv-a from=CLOSED to=OPEN" in cluster.b_log(),
            timeout_s=20,
            message="B's breaker of A opens",
        )
        # Revive goes on postponing (each CK waits at least the cool-down): watch a few more rewrites.
        started, log = time.monotonic(), cluster.b_log()
        rpcs_before, rewrites_before = count("event=remote_read_failed broker=rv-a", log), count("ck_rewritten", log)
        wait_until(
            lambda: count("event=ck_rewritten", cluster.b_log()) >= rewrites_before + 12,
            timeout_s=30,
            message="two more rounds of rewrites",
        )
        elapsed_s, log = time.monotonic() - started, cluster.b_log()
        rpcs = count("event=remote_read_failed broker=rv-a", log) - rpcs_before
        # At most one probe per cool-down, whatever the number of CKs and queues.
        assert rpcs <= elapsed_s / (COOL_DOWN_MS / 1000) + 1, (rpcs, elapsed_s)
        assert "dead_lettered_after_failed_reads" not in log and await cluster.dead_letters() == []

        cluster.a.restart()
        retry = cluster.reader("rv-b")

        async def copies():
            got = await retry.read_many(f"%RETRY%{GROUP}_{TOPIC}", 0, list(range(len(cluster.sent))))
            found = [r.message for r in got.values() if r.status is ReadStatus.FOUND]
            return found if len(found) == len(cluster.sent) else None

        found = await eventually(copies, 30, "every retry copy on B")
        assert sorted(m.body for m in found) == sorted(cluster.sent.values())
        assert {(m.reconsume_times, m.properties["RETRY_TOPIC"], m.properties["origin"]) for m in found} == {
            (1, TOPIC, "a")
        }
        assert await cluster.dead_letters() == []
    finally:
        await cluster.close()


async def test_a_broker_that_never_returns_ends_in_reference_dead_letters_that_resend_delivers_later(tmp_path):
    cluster = Cluster(tmp_path)
    try:
        await cluster.send_and_seed()
        cluster.a.kill()
        cluster.start_b("pop_ck_rewrite_backoff_ms=300,300")
        wait_until(
            lambda: count("event=dead_lettered_after_failed_reads", cluster.b_log()) >= len(cluster.sent),
            timeout_s=40,
            message="every CK ended in a reference dead letter",
        )
        dead = await cluster.dead_letters(at_least=len(cluster.sent))
        refs = [DeadLetterReference.of_message(m.properties, m.body) for m in dead]
        assert await cluster.dlq_consumer_sees() == []  # a %DLQ% consumer never gets a reference
        assert sorted((r.queue_id, r.queue_offset) for r in refs) == sorted(cluster.sent)
        assert {(r.broker_name, r.group, r.topic, r.rewrite_count) for r in refs} == {("rv-a", GROUP, TOPIC, 2)}

        listed = cluster.cli("dlq", "list", GROUP, "--json")
        rows = [json.loads(line) for line in listed.stdout.splitlines()]
        assert listed.returncode == 0 and {(r["kind"], r["reference"]["broker"]) for r in rows} == {
            ("reference", "rv-a")
        }
        assert {r["reference"]["reason"] for r in rows} == {r.reason for r in refs} and all(r.reason for r in refs)

        refused = cluster.cli("dlq", "resend", GROUP, "--all")
        lines = refused.stdout.splitlines()
        assert refused.returncode == 1, refused
        assert sum("not read" in line and "on rv-a" in line and "try again later" in line for line in lines) == len(
            cluster.sent
        ), lines
        assert len(await cluster.dead_letters()) == len(cluster.sent)  # the entries stay

        cluster.a.restart()
        # B reads them from A now and writes the real dead letters, which a %DLQ% consumer gets
        real = await eventually(
            lambda: cluster.dlq_consumer_sees(at_least=len(cluster.sent)), 30, "the real dead letters on B"
        )
        assert sorted(m.body for m in real) == sorted(cluster.sent.values())
        assert {m.properties["DLQ_ORIGIN_TOPIC"] for m in real} == {TOPIC}
        assert {m.properties["PMQ_DLQ_REASON"] for m in real} <= {r.reason for r in refs}  # the reads' reasons
        rows = [json.loads(line) for line in cluster.cli("dlq", "list", GROUP, "--json").stdout.splitlines()]
        assert sorted(r["kind"] for r in rows) == ["message"] * len(cluster.sent)  # the references closed
        resent = cluster.cli("dlq", "resend", GROUP, "--all", "--to-topic")
        assert resent.returncode == 0 and f"resent {len(cluster.sent)} message(s)" in resent.stdout, resent
        reader = cluster.reader("rv-a")
        delivered = []
        for queue_id in range(QUEUES):
            got = await reader.read_many(TOPIC, queue_id, list(range(len(cluster.sent) * 2)))
            delivered += [
                r.message for o, r in got.items() if r.status is ReadStatus.FOUND and (queue_id, o) not in cluster.sent
            ]
        assert sorted(m.body for m in delivered) == sorted(cluster.sent.values())
        assert {m.properties.get("origin") for m in delivered} == {"a"}
        assert sorted(m.keys for m in delivered) == sorted([f"k{i}"] for i in range(6))
    finally:
        await cluster.close()
