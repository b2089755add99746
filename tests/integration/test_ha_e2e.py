"""Issue 7's scenario end to end, real processes (docs/ha.md "Tests"): a name server, group A = SYNC master +
slave (acting master, remote escape), group B = master (its revive with a 1-failure breaker, a 2 s cool-down
and a short backoff table).

The chain: the official client pops from both groups and acks half; ``kill -9`` A's master: exactly the
un-acked messages come back, every message sent OK is still readable; an official client that dials B gets a
route through which it receives A's messages from A's acting slave (their CKs escape to B, naming group A),
and leaves some un-acked; A's slave is killed too: B's revive cannot read them (its breaker of A opens, the CKs
are rewritten with backoff, remote reads stay at about one per cool-down, nothing is dead-lettered); A's slave
restarts: B revives them (retry copies on B, attempt counted).

The ending: with a 2-step backoff table and A's slave gone, B ends the CKs in dead-letter references, which
``pocketmq dlq resend`` cannot resolve yet (exit 1); once A's slave is back B writes the real dead letters
itself, and ``resend --to-topic`` delivers them.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from tests.integration.test_ha_acting_master import (
    GROUP,
    acting,
    at_least,
    call,
    official_receive,
    pop,
    pull,
    replicated,
    send,
)

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.config import ClientConfig
from pocketmq.client.pull_consumer import AsyncPullConsumer
from pocketmq.common.dead_letter_reference import DeadLetterReference
from pocketmq.common.topic import pop_retry_topic
from pocketmq.ops.dead_letters import dead_messages
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.ha_cluster import GROUP_A, TwoGroups, start_two_groups
from pocketmq.testing.polling import eventually, wait_until
from pocketmq.testing.processes import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]
COOL_DOWN_MS = 2000
B_FLAGS = (
    "--set",
    "breaker_failure_threshold=1",
    "--set",
    f"breaker_cool_down_ms={COOL_DOWN_MS}",
    "--set",
    "remote_read_timeout_ms=1000",
    "--set",
    "remote_read_retry_unreachable_ms=1000",
)
ORDERS = "e2e-orders"  # popped from both masters before the kill
LATE = "e2e-late"  # popped after the kill through B's route: A's part through A's acting slave
ON_A, ON_B = ["a0", "a1", "a2", "a3"], ["b0", "b1", "b2", "b3"]
LATE_ON_A, LATE_ON_B = ["la0", "la1", "la2", "la3"], ["lb0", "lb1"]
ORDERS_INVISIBLE_S = 5
LATE_INVISIBLE_S = 10  # counted from the end of the second client run: only the kill of A's slave must fit in it


def unacked(bodies: list[str]) -> list[str]:
    return [b for b in bodies if int(b[-1]) % 2]


async def send_all(client: RemotingClient, addr: str, topic: str, bodies: list[str]) -> None:
    for body in bodies:
        reply = await send(client, addr, topic, body.encode())
        assert reply.code == ResponseCode.SUCCESS, (topic, body, reply.code, reply.remark)


async def consumer_offset(client: RemotingClient, addr: str, topic: str) -> int:
    reply = await call(client, addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP, "topic": topic})
    return sum(e["consumerOffset"] for e in json.loads(reply.body)["offsetTable"]) if reply.code == 0 else -1


async def readable_bodies(namesrv: str, topic: str) -> set[str]:
    """Every body of ``topic`` the SDK pull consumer reads through the name server's route."""
    async with AsyncPullConsumer("e2e-checker", ClientConfig(namesrv_addr=namesrv)) as consumer:
        bodies = set()
        for queue in await consumer.fetch_queues(topic):
            bodies |= {m.body.decode() for m in (await consumer.pull(queue, 0, 64)).messages}
        return bodies


async def dead_letters(namesrv: str, group: str = GROUP, at_least: int = 0) -> list:
    """``group``'s DLQ entries as ``dlq list`` reads them, once there are ``at_least``: a broker registers a new
    DLQ topic with the name server a moment after writing its first entry, and looking does not create it."""

    async def listed():
        async with AsyncAdmin(ClientConfig(namesrv_addr=namesrv)) as admin:
            found = [m for _, m in await dead_messages(admin, group, 100)]
        return (found,) if len(found) >= at_least else None  # a tuple: truthy when the list is empty too

    return (await eventually(listed, 15, f"{at_least} dead letters listed"))[0]


def count(pattern: str, proc) -> int:
    return len(re.findall(pattern, proc.log_path.read_text(errors="replace")))


async def start(tmp_path, *b_settings: str) -> tuple[TwoGroups, RemotingClient]:
    """The two groups with ORDERS and LATE on both masters, once a SYNC send is acked by A's slave."""
    flags = [*B_FLAGS]
    for setting in b_settings:
        flags += ["--set", setting]
    groups = start_two_groups(tmp_path, b_flags=tuple(flags))
    client = RemotingClient()
    try:
        await groups.ready([ORDERS, LATE])
    except BaseException:
        await client.close()
        groups.kill_all()
        raise
    return groups, client


async def test_pop_through_both_groups_survives_losing_group_a_and_comes_back_with_its_slave(tmp_path):
    groups, client = await start(tmp_path, "pop_ck_rewrite_backoff_ms=" + ",".join(["500"] * 20))
    a0, a1, b0 = groups.a_master, groups.a_slave, groups.b_master
    try:
        await send_all(client, a0.remoting, ORDERS, ON_A)
        await send_all(client, b0.remoting, ORDERS, ON_B)
        await send_all(client, a0.remoting, LATE, LATE_ON_A)
        await send_all(client, b0.remoting, LATE, LATE_ON_B)

        # 1. the official client (dialling A's master) pops from both groups and acks half
        orders_unacked = unacked(ON_A) + unacked(ON_B)
        first = official_receive(tmp_path, a0.grpc, ORDERS, 8, invisible_s=ORDERS_INVISIBLE_S, skip_ack=orders_unacked)
        assert first["bodies"] == sorted(ON_A + ON_B) and set(first["attempts"]) == {1}, first
        await eventually(lambda: replicated(client, a0.remoting, a1.remoting), 10, "slave has the CKs and ACKs")
        await eventually(
            lambda: _equals(consumer_offset(client, a1.remoting, ORDERS), len(ON_A)), 10, "slave has the pop offsets"
        )

        # 2. kill -9 A's master: exactly the un-acked messages come back (as retry copies on B: A's through its
        #    acting slave's escape bridge; on A if its master revived them before it died, on a slow machine);
        #    every message sent OK is still readable (A's through its slave)
        a0.kill()
        await eventually(lambda: acting(client, a1.remoting, "true"), 15, "A's slave acting as master")
        assert await readable_bodies(groups.ns, ORDERS) >= set(ON_A + ON_B)
        assert await readable_bodies(groups.ns, LATE) >= set(LATE_ON_A + LATE_ON_B)
        copies = await eventually(
            lambda: _retry_copies(client, [b0.remoting, a1.remoting], ORDERS, 4), 20, "4 retry copies"
        )
        assert sorted(m.body.decode() for m in copies) == sorted(orders_unacked)
        assert {m.reconsume_times for m in copies} == {1}

        # 3. an official client dialling B (QueryRoute through B) receives the copies (attempt 2) and LATE from
        #    both groups, A's part through A's acting slave; it leaves half of LATE un-acked
        late_unacked = unacked(LATE_ON_A) + unacked(LATE_ON_B)
        second = official_receive(
            tmp_path, b0.grpc, ORDERS, 4 + 6, topics=[ORDERS, LATE], invisible_s=LATE_INVISIBLE_S, skip_ack=late_unacked
        )
        a1.kill()  # 4. A's slave goes too, before LATE's invisible time ends
        assert second["bodies"] == sorted(orders_unacked + LATE_ON_A + LATE_ON_B), second
        assert {second["attempt_of"][b] for b in orders_unacked} == {2}
        assert {second["attempt_of"][b] for b in LATE_ON_A + LATE_ON_B} == {1}, second
        late_retry = pop_retry_topic(GROUP, LATE)
        assert not await pull(client, b0.remoting, late_retry), "LATE came back before A's slave was killed"

        # B's revive cannot read A's un-acked LATE messages: the breaker opens, the CKs wait, nothing ends
        wait_until(
            lambda: count(f"event=breaker_state_changed broker={GROUP_A} from=CLOSED to=OPEN", b0),
            20,
            message="B's breaker of group A opens",
        )
        opened = time.monotonic()
        failed_reads_at_open = count(f"event=remote_read_failed broker={GROUP_A} ", b0)
        rewritten = (
            rf"event=ck_rewritten group={GROUP} broker={GROUP_A} topic={LATE} queue=0 offset=(\d+) "
            r"rewrites=(\d+) wait_ms=(\d+)"
        )
        wait_until(
            lambda: _twice_each(_rewrites_per_offset(rewritten, b0), [1, 3]),
            30,
            message="each un-acked LATE message of A rewritten twice",
        )
        elapsed_s = time.monotonic() - opened
        failed_reads = count(f"event=remote_read_failed broker={GROUP_A} ", b0) - failed_reads_at_open
        assert failed_reads <= elapsed_s / (COOL_DOWN_MS / 1000) + 1, (failed_reads, elapsed_s)
        waits = [int(w) for _, _, w in re.findall(rewritten, b0.log_path.read_text())]
        assert min(waits) >= 500, waits  # the table's step at least: not every 200 ms revive pass
        assert "dead_lettered_after_failed_reads" not in b0.log_path.read_text()
        assert await dead_letters(groups.ns) == []
        # meanwhile B revives its own un-acked LATE message: A's open breaker holds back only A's CKs
        own = await eventually(lambda: at_least(client, b0.remoting, late_retry, 1), 10, "B's own LATE message revived")
        assert sorted(m.body.decode() for m in own) == unacked(LATE_ON_B)

        # 5. A's slave restarts (and acts again): B revives the rest, attempt counted
        a1.restart()
        back = await eventually(
            lambda: at_least(client, b0.remoting, late_retry, len(late_unacked)),
            20,
            "A's un-acked LATE messages revived on B",
        )
        assert sorted(m.body.decode() for m in back) == sorted(late_unacked)
        assert {m.reconsume_times for m in back} == {1}
        assert count(f"event=breaker_state_changed broker={GROUP_A} from=HALF_OPEN to=CLOSED", b0) >= 1
        assert await dead_letters(groups.ns) == []
    finally:
        await client.close()
        groups.kill_all()


async def test_group_a_gone_for_good_ends_in_reference_dead_letters_that_resend_delivers_after(tmp_path):
    groups, client = await start(tmp_path, "pop_ck_rewrite_backoff_ms=300,300")
    a0, a1, b0 = groups.a_master, groups.a_slave, groups.b_master
    try:
        await send_all(client, a0.remoting, LATE, LATE_ON_A)
        await eventually(lambda: replicated(client, a0.remoting, a1.remoting), 10, "slave caught up")
        a0.kill()
        await eventually(lambda: acting(client, a1.remoting, "true"), 15, "A's slave acting as master")
        popped = await pop(client, a1.remoting, GROUP_A, LATE, invisible_ms=2000)  # CK escaped to B, naming A
        a1.kill()
        assert sorted(m.body.decode() for m in popped) == LATE_ON_A
        sent = {(m.queue_id, m.queue_offset) for m in popped}

        wait_until(
            lambda: count("event=dead_lettered_after_failed_reads", b0) >= len(sent),
            40,
            message="every message of A ended in a reference dead letter on B",
        )
        refs = [
            DeadLetterReference.of_message(m.properties, m.body)
            for m in await dead_letters(groups.ns, at_least=len(sent))
        ]
        assert sorted((r.queue_id, r.queue_offset) for r in refs) == sorted(sent)
        assert {(r.broker_name, r.group, r.topic, r.rewrite_count) for r in refs} == {(GROUP_A, GROUP, LATE, 2)}
        listed = _cli(groups, "dlq", "list", GROUP, "--json")
        assert {json.loads(line)["kind"] for line in listed.stdout.splitlines()} == {"reference"}, listed
        refused = _cli(groups, "dlq", "resend", GROUP, "--all")
        assert refused.returncode == 1, refused
        assert sum(
            f"on {GROUP_A}" in line and "try again later" in line for line in refused.stdout.splitlines()
        ) == len(sent), refused.stdout

        a1.restart()  # A is readable again (through its slave; its master stays down)
        await eventually(lambda: acting(client, a1.remoting, "true"), 15, "A's slave back")

        async def resolved() -> bool:  # B wrote the real dead letters itself, and closed the references
            dead = await dead_letters(groups.ns, at_least=len(sent))
            return len(dead) == len(sent) and not any("PMQ_DLQ_REFERENCE" in m.properties for m in dead)

        await eventually(resolved, 20, "the real dead letters on B")
        resent = _cli(groups, "dlq", "resend", GROUP, "--all", "--to-topic")
        assert resent.returncode == 0 and f"resent {len(sent)} message(s)" in resent.stdout, resent
        # A has no master, so the producer writes them to B's queue of the topic
        delivered = await eventually(lambda: at_least(client, b0.remoting, LATE, len(sent)), 10, "resent messages on B")
        assert sorted(m.body.decode() for m in delivered) == LATE_ON_A
    finally:
        await client.close()
        groups.kill_all()


def _cli(groups: TwoGroups, *args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, "-n", groups.ns, timeout_s=60)


def _rewrites_per_offset(pattern: str, proc) -> dict[int, int]:
    latest: dict[int, int] = {}
    for offset, rewrites, _ in re.findall(pattern, proc.log_path.read_text(errors="replace")):
        latest[int(offset)] = max(latest.get(int(offset), 0), int(rewrites))
    return latest


async def _retry_copies(client: RemotingClient, addrs: list[str], topic: str, count: int):
    """At least ``count`` messages in the pop retry topic of ``topic`` on the brokers at ``addrs``, else None."""
    found = [m for addr in addrs for m in await pull(client, addr, pop_retry_topic(GROUP, topic))]
    return found if len(found) >= count else None


def _twice_each(rewrites: dict[int, int], offsets: list[int]) -> bool:
    return sorted(rewrites) == offsets and min(rewrites.values()) >= 2


async def _equals(value_coro, want) -> bool:
    return await value_coro == want
