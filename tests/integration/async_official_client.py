"""The official RocketMQ 5 Python client's asynchronous calls, unmodified, in its own process: what its async
producer and async simple consumer examples do.

Run as ``python async_official_client.py SPEC_JSON`` with HOME set to a temporary directory. SPEC:
{"endpoint": "127.0.0.1:P", "topic": T, "group": G, "count": N, "deadline_s": D}. It sends N messages with
``Producer.send_async`` (all in flight together, then each future's result), receives with
``SimpleConsumer.receive_async`` (waiting for each future) and acks each with ``ack_async``, except the first
message received, whose invisible time it changes to 2 s with ``change_invisible_duration_async`` (it is acked
when it comes back), until every body was acked or D passed. Prints one JSON line: the message ids the send
futures gave, and every delivery ([message id, body]) in order.
"""

from __future__ import annotations

import json
import sys
import time


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=10)
    producer = Producer(config, (spec["topic"],))
    producer.startup()
    try:
        futures = []
        for i in range(spec["count"]):
            msg = Message()
            msg.topic = spec["topic"]
            msg.body = f"async-{i}".encode()
            futures.append(producer.send_async(msg))
        sent = [future.result(timeout=spec["deadline_s"]).message_id for future in futures]
    finally:
        producer.shutdown()

    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    deliveries, acked = [], set()
    deadline = time.monotonic() + spec["deadline_s"]
    try:
        while len(acked) < spec["count"] and time.monotonic() < deadline:
            for msg in consumer.receive_async(16, 30).result(timeout=spec["deadline_s"]):
                body = msg.body.decode()
                deliveries.append([msg.message_id, body])
                if len(deliveries) == 1:  # back in 2 s instead of 30, not acked this time
                    consumer.change_invisible_duration_async(msg, 2)
                    continue
                # 5.1.2's ack_async and change_invisible_duration_async return None, not the future their
                # docstrings promise: the example calls them and moves on, and so does this script
                consumer.ack_async(msg)
                acked.add(body)
    finally:
        consumer.shutdown()
    print(json.dumps({"sent": sent, "deliveries": deliveries}))
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
