"""POP with the SDK's SimpleConsumer against a real ``pocketmq serve`` (remoting protocol).

- 1,000 messages, half acked: every dropped one comes back, attempt 2 (reconsume times 1), nothing acked does.
- change_invisible_duration postpones redelivery; batch ack; stale handles are refused.
- The acks of one event-loop turn go as one batch, and each still gets its own outcome (a stale one fails alone).
- (slow) ``kill -9`` with 500 messages in flight: after the restart every un-acked one is redelivered, once.
"""

from __future__ import annotations

import asyncio
import copy
import time

import pytest

from pocketmq.client import Admin, AsyncSimpleConsumer, ClientConfig, Message, Producer, SimpleConsumer
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

FAST_REVIVE = ["--set", "pop_revive_interval_ms=100"]
INVISIBLE_MS = 1500


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("pop"), "broker-pop", extra_args=FAST_REVIVE).start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture(scope="module")
def config(broker) -> ClientConfig:
    return ClientConfig(namesrv_addr=broker.namesrv)


def produce(config: ClientConfig, topic: str, count: int, queues: int = 4) -> None:
    with Admin(config) as admin:
        admin.create_topic(topic, queues=queues)
    with Producer(config) as producer:
        for start in range(0, count, 100):
            producer.send_batch([Message.create(topic, f"{i}") for i in range(start, min(start + 100, count))])


def receive_all(consumer: SimpleConsumer, want: int, timeout_s: float = 20.0, invisible_ms: int = INVISIBLE_MS):
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got += consumer.receive(32, invisible_ms, await_duration_ms=1000)
    return got


def test_dropped_half_comes_back_with_attempt_two(config):
    produce(config, "pop_half", 200)
    with SimpleConsumer("pop_half_group", {"pop_half": "*"}, config) as consumer:
        # Every receive and ack must be done before the first invisible time runs out (an ack after it is too
        # late, and a message received then comes twice): 200 messages and 4 s leave room on a loaded machine.
        first = receive_all(consumer, 200, invisible_ms=4000)
        assert sorted(int(m.body) for m in first) == list(range(200))
        assert {m.reconsume_times for m in first} == {0}
        acked = [m for m in first if int(m.body) % 2 == 0]
        consumer.ack_batch(acked[:50])
        for msg in acked[50:]:
            consumer.ack(msg)
        again = receive_all(consumer, 100, invisible_ms=60_000)
        assert sorted(int(m.body) for m in again) == list(range(1, 200, 2))
        assert {m.reconsume_times for m in again} == {1}
        assert {m.topic for m in again} == {"pop_half"}
        consumer.ack_batch(again)
        assert consumer.receive(32, INVISIBLE_MS, await_duration_ms=2 * INVISIBLE_MS) == []


def test_change_invisible_duration_postpones(config):
    produce(config, "pop_change", 1, queues=1)
    with SimpleConsumer("pop_change_group", {"pop_change": "*"}, config) as consumer:
        [msg] = receive_all(consumer, 1)
        consumer.change_invisible_duration(msg, 5000)
        started = time.monotonic()
        assert consumer.receive(32, INVISIBLE_MS, await_duration_ms=3000) == []  # past the first 1.5 s
        [again] = receive_all(consumer, 1)
        assert time.monotonic() - started >= 4.0
        assert again.reconsume_times == 1 and again.body == msg.body
        with pytest.raises(RemoteServerError):
            consumer.ack(msg)  # its CK was revived: the handle is stale
        consumer.ack(again)


def test_the_acks_of_one_turn_each_get_their_own_outcome(config):
    produce(config, "pop_together", 3, queues=1)

    async def go() -> None:
        async with AsyncSimpleConsumer("pop_together_group", {"pop_together": "*"}, config) as consumer:
            got: list = []
            deadline = time.monotonic() + 20
            while len(got) < 3 and time.monotonic() < deadline:
                got += await consumer.receive(32, INVISIBLE_MS, await_duration_ms=1000)
            assert len(got) == 3
            stale = copy.deepcopy(got[0])
            await consumer.change_invisible_duration(got[0], INVISIBLE_MS)  # the copy's handle is stale now
            outcomes = await asyncio.gather(*(consumer.ack(m) for m in [stale, *got]), return_exceptions=True)
            assert isinstance(outcomes[0], RemoteServerError), outcomes
            assert outcomes[1:] == [None, None, None]
            assert await consumer.receive(32, INVISIBLE_MS, await_duration_ms=2 * INVISIBLE_MS) == []

    asyncio.run(go())


@pytest.mark.slow
def test_kill_9_with_messages_in_flight(tmp_path):
    proc = broker_process(tmp_path, "broker-kill", extra_args=FAST_REVIVE + ["--remoting-port", "0"])
    proc.start()
    config = ClientConfig(namesrv_addr=proc.namesrv)
    produce(config, "pop_kill", 600)
    with SimpleConsumer("pop_kill_group", {"pop_kill": "*"}, config) as consumer:
        first = receive_all(consumer, 600, invisible_ms=4000)
        acked = {int(m.body) for m in first[:100]}
        consumer.ack_batch(first[:100])
    proc.kill()
    proc.restart()
    config = ClientConfig(namesrv_addr=proc.namesrv)
    with SimpleConsumer("pop_kill_group", {"pop_kill": "*"}, config) as consumer:
        expected = set(range(600)) - acked
        bodies: list[int] = []
        deadline = time.monotonic() + 30
        while not expected <= set(bodies) and time.monotonic() < deadline:
            bodies += [int(m.body) for m in consumer.receive(32, 60_000, await_duration_ms=1000)]
        # Every un-acked message comes back, once, through revive; an acked one never: even when its pop offset
        # was not saved before the kill, its CK in the revive queue moves the offset past it at restart.
        assert sorted(expected - set(bodies)) == []
        assert len(bodies) == len(set(bodies))
        assert sorted(acked & set(bodies)) == []
    proc.stop()


def test_dlq_resend_reaches_only_the_pop_group_that_failed(config, capsys):
    """Two POP groups on one topic: pop_fail (no retries) lets the message die, pop_ok acks it. ``dlq resend``
    brings it back to pop_fail alone, through its pop retry topic; ``--to-topic`` reaches pop_ok too."""
    import json

    from pocketmq.cli.main import main

    produce(config, "pop_two_groups", 1, queues=1)
    with Admin(config) as admin:
        admin.create_group("pop_fail", retry_max_times=0)  # the first un-acked delivery is the last
    with (
        SimpleConsumer("pop_ok", {"pop_two_groups": "*"}, config) as ok,
        SimpleConsumer("pop_fail", {"pop_two_groups": "*"}, config) as failing,
    ):
        ok.ack_batch(receive_all(ok, 1))
        [dropped] = receive_all(failing, 1, invisible_ms=500)  # not acked: revive dead-letters it
        ns = ["-n", config.namesrv_addr, "--json"]

        def dead() -> bool:  # the DLQ topic is in the name server's routes a moment after its first entry
            assert main(["dlq", "list", "pop_fail", *ns]) == 0
            return any('"message_id"' in line for line in capsys.readouterr().out.splitlines())

        wait_until(dead, timeout_s=20, message="pop_fail's dead letter")
        assert main(["dlq", "resend", "pop_fail", "--all", *ns]) == 0
        [sent] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"topic"' in line]
        assert sent["topic"] == "%RETRY%pop_fail_pop_two_groups"
        [again] = receive_all(failing, 1)
        assert (again.body, again.topic, again.msg_id) == (dropped.body, "pop_two_groups", dropped.msg_id)
        failing.ack(again)
        assert ok.receive(32, INVISIBLE_MS, await_duration_ms=1000) == []  # pop_ok is not given it again

        assert main(["dlq", "resend", "pop_fail", "--all", "--to-topic", *ns]) == 0
        [republished] = receive_all(ok, 1)
        assert republished.body == dropped.body  # so pop_ok was listening all along
        ok.ack(republished)
