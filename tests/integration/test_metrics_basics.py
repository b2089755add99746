"""``/metrics`` of a real broker with traffic: the families operators graph first show the real counts.

One broker with ``--metrics-port 0``. Before any traffic the unlabelled counters read 0. Then 10 messages of
100 bytes to a 2-queue topic (one send at a time) and 3 with a delay; a pull consumer reads 6 of them from queue
0's and commits there, a POP consumer takes 4 and keeps them unacked. The scrape shows messages and bytes in
per topic, out per topic and group, the pull group's lag per queue, the POP group's messages in flight, the
delayed messages in the timer's backlog, the latency of each request code served, the store's bytes and disk,
the remoting connections and the process's CPU and memory.
"""

from __future__ import annotations

import pytest

from pocketmq.client import Admin, ClientConfig, Message, Producer, PullConsumer, SimpleConsumer
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process
from pocketmq.testing.scrape import metric, scrape

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

TOPIC, DELAYED_TOPIC = "metrics_orders", "metrics_later"
PULL_GROUP, POP_GROUP = "metrics_pullers", "metrics_poppers"
BODY = b"m" * 100


def test_metrics_show_traffic_storage_lag_and_latency(tmp_path):
    broker = broker_process(tmp_path, "broker-metrics", extra_args=["--metrics-port", "0"]).start()
    try:
        lines = scrape(broker).splitlines()  # unlabelled counters have a 0 sample before they first move
        assert "pocketmq_config_updates_total 0.0" in lines and "pocketmq_pop_revive_cks_total 0.0" in lines

        config = ClientConfig(namesrv_addr=broker.namesrv)
        with Admin(config) as admin:
            admin.create_topic(TOPIC, queues=2)
            admin.create_topic(DELAYED_TOPIC, queues=1)
        with Producer(config) as producer:
            for _ in range(10):
                producer.send(Message(TOPIC, BODY))
            for _ in range(3):
                producer.send(Message(DELAYED_TOPIC, BODY), delay_level=18)  # 2 hours: stays in the timer

        with PullConsumer(PULL_GROUP, config) as consumer:
            queue = next(q for q in consumer.fetch_queues(TOPIC) if q.queue_id == 0)
            result = consumer.pull(queue, 0, 32)
            assert len(result.messages) == 5  # round robin: half of the 10 in each queue
            consumer.commit(queue, 2)
            queue_1 = next(q for q in consumer.fetch_queues(TOPIC) if q.queue_id == 1)
            assert len(consumer.pull(queue_1, 0, 1).messages) == 1
            consumer.commit(queue_1, 1)
        with SimpleConsumer(POP_GROUP, {TOPIC: "*"}, config) as consumer:
            popped: list = []
            wait_until(
                lambda: len(popped) >= 4 or popped.extend(consumer.receive(4 - len(popped), 60_000)),
                timeout_s=15,
                message="4 popped",
            )

        assert metric(broker, "pocketmq_messages_in_total", topic=TOPIC) == 10
        assert metric(broker, "pocketmq_message_bytes_in_total", topic=TOPIC) == 1000
        assert metric(broker, "pocketmq_messages_in_total", topic=DELAYED_TOPIC) == 3
        assert metric(broker, "pocketmq_messages_out_total", topic=TOPIC, group=PULL_GROUP) == 6
        assert metric(broker, "pocketmq_messages_out_total", topic=TOPIC, group=POP_GROUP) == 4
        assert metric(broker, "pocketmq_message_bytes_out_total", topic=TOPIC, group=POP_GROUP) > 400  # + headers
        lag = {q: metric(broker, "pocketmq_consumer_lag_messages", group=PULL_GROUP, queue_id=str(q)) for q in (0, 1)}
        assert lag == {0: 3, 1: 4}  # 5 in each queue, committed 2 and 1
        assert metric(broker, "pocketmq_pop_in_flight_messages", group=POP_GROUP) == 4
        assert metric(broker, "pocketmq_timer_backlog_messages") == 3

        sends = metric(broker, "pocketmq_request_latency_seconds_count", code="310", request="SEND_MESSAGE_V2")
        pulls = metric(broker, "pocketmq_request_latency_seconds_count", request="PULL_MESSAGE")
        assert sends == 13 and pulls == 2
        assert 0 < metric(broker, "pocketmq_request_latency_seconds_sum", request="PULL_MESSAGE") < 10
        assert metric(broker, "pocketmq_store_bytes") > 13 * len(BODY)
        assert metric(broker, "pocketmq_store_disk_free_bytes") > 0
        assert metric(broker, "pocketmq_remoting_connections") >= 0
        assert metric(broker, "process_resident_memory_bytes") > 10_000_000
        assert metric(broker, "process_cpu_seconds_total") > 0
    finally:
        assert broker.stop() == 0, broker.log_tail()
