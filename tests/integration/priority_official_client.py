"""Priority and FIFO messages with the unmodified official RocketMQ 5 Python client, in its own process.

Run as ``python priority_official_client.py SPEC_JSON`` with HOME set to a temporary directory. SPEC:
{"endpoint": "127.0.0.1:P", "topic": T, "group": G, "send": [[body, priority or null, message group or null],
...], "receive": N, "batch": B (default 32), "deadline_s": D}. It sends the messages with a Producer (a priority
sets ``message.priority``, a group ``message.message_group``), then receives with a SimpleConsumer (B messages
at most per receive, each acked at once) until N came or D passed, and prints one JSON line: the sent count and
every delivery in order ([seconds since the receiving started, body, priority, message group]).
"""

from __future__ import annotations

import json
import sys
import time


def send(config, spec: dict) -> int:
    from rocketmq import Message, Producer

    producer = Producer(config, (spec["topic"],))
    producer.startup()
    try:
        for body, priority, group in spec["send"]:
            msg = Message()
            msg.topic = spec["topic"]
            msg.body = body.encode()
            if priority is not None:
                msg.priority = priority
            if group is not None:
                msg.message_group = group
            producer.send(msg)
    finally:
        producer.shutdown()
    return len(spec["send"])


def receive(config, spec: dict) -> list:
    from rocketmq import FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    got = []
    started = time.monotonic()
    try:
        while len(got) < spec["receive"] and time.monotonic() < started + spec["deadline_s"]:
            for msg in consumer.receive(spec.get("batch", 32), 30):
                got.append([round(time.monotonic() - started, 2), msg.body.decode(), msg.priority, msg.message_group])
                consumer.ack(msg)
    finally:
        consumer.shutdown()
    return got


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=10)
    sent = send(config, spec) if spec.get("send") else 0
    got = receive(config, spec) if spec.get("receive") else []
    print(json.dumps({"sent": sent, "got": got}))
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
