"""Redelivery against a real ``pocketmq serve`` with the default revive settings: un-acked POP messages come back
once each, and the broker records how late (``pocketmq_pop_revive_lateness_seconds``); how late is speed, which
bench/pop.py measures. A message invisible for less than the revive interval comes back, and never before its
invisible time is over."""

from __future__ import annotations

import time

import pytest

from pocketmq.client import Admin, ClientConfig, Message, Producer, SimpleConsumer
from pocketmq.common import properties as props
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process
from pocketmq.testing.scrape import metric

pytestmark = pytest.mark.timeout(60)
LATENESS = "pocketmq_pop_revive_lateness_seconds"
MESSAGES = 5
INVISIBLE_MS = 1_000


def test_unacked_messages_come_back_once_each_and_revive_records_its_lateness(tmp_path):
    proc = broker_process(tmp_path, "broker-redelivery", extra_args=["--metrics-port", "0"]).start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        with Admin(config) as admin:
            admin.create_topic("redelivery", queues=4)
        with Producer(config) as producer:
            for i in range(MESSAGES):
                producer.send(Message.create("redelivery", f"{i}"))
        with SimpleConsumer("redelivery_group", {"redelivery": "*"}, config) as consumer:
            first, again = [], []
            deadline = time.monotonic() + 30
            while len(again) < MESSAGES and time.monotonic() < deadline:
                # one message a receive: CKs of their own, due at different times; the first deliveries are not acked
                for msg in consumer.receive(1, INVISIBLE_MS, await_duration_ms=1000):
                    (first if msg.reconsume_times == 0 else again).append(msg)
                    if msg.reconsume_times:
                        consumer.ack(msg)
        assert sorted(m.body for m in again) == sorted(m.body for m in first) == [b"%d" % i for i in range(MESSAGES)]
        # How late is a matter of speed (bench/pop.py --cases lateness, docs/benchmarks.md); the wake-up rules are
        # tested on a fake clock (tests/unit/pop/test_revive_schedule.py). Here: every CK's lateness is recorded.
        wait_until(lambda: metric(proc, f"{LATENESS}_count") >= MESSAGES, 10, "revive's lateness of every CK")
        assert metric(proc, f"{LATENESS}_sum") >= 0
    finally:
        assert proc.stop() == 0, proc.log_tail()


SHORT_INVISIBLE_MS = 300


def deadline_ms(msg) -> int:
    """When a received message's invisible time ends: the pop time + invisible time of its receipt handle
    (``<start> <pop time ms> <invisible ms> ...``), on the broker's clock (this machine's)."""
    parts = msg.properties[props.POP_CK].split(" ")
    return int(parts[1]) + int(parts[2])


def test_a_message_invisible_for_300_ms_comes_back_and_not_early(tmp_path):
    # below the revive interval (1 s): the CK is popped between full passes and must not wait for one
    extra_args = ["--set", f"pop_min_invisible_ms={SHORT_INVISIBLE_MS}"]
    proc = broker_process(tmp_path, "broker-short-invisible", extra_args=extra_args).start()
    try:
        config = ClientConfig(namesrv_addr=proc.namesrv)
        with Admin(config) as admin:
            admin.create_topic("short_invisible", queues=2)
        with Producer(config) as producer:
            producer.send(Message.create("short_invisible", "once"))
        with SimpleConsumer("short_invisible_group", {"short_invisible": "*"}, config) as consumer:
            first = wait_until(lambda: consumer.receive(1, SHORT_INVISIBLE_MS, await_duration_ms=1000), 20, "a pop")
            assert first[0].reconsume_times == 0 and first[0].body == b"once"
            again = wait_until(lambda: consumer.receive(1, SHORT_INVISIBLE_MS, await_duration_ms=1000), 20, "again")
            received_ms = time.time() * 1000
            consumer.ack(again[0])
        assert again[0].body == b"once" and again[0].reconsume_times == 1
        assert received_ms >= deadline_ms(first[0]), "handed back before its invisible time was over"
    finally:
        assert proc.stop() == 0, proc.log_tail()
