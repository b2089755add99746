"""Drive the unmodified official RocketMQ 5 Python client's SimpleConsumer on a staged (group, topic).

Run as ``python staged_official_client.py SPEC_JSON`` with HOME set to a temporary directory. SPEC:
{"endpoint": "127.0.0.1:P", "topic": T, "group": G, "count": N, "deadline_s": D}. It receives (up to 32 at a
time) and acks every message, until N distinct bodies came or D passed, and prints one JSON line: the bodies
of each receive, in order.
"""

from __future__ import annotations

import json
import sys
import time


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=5)
    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: FilterExpression("*")}, await_duration=2)
    consumer.startup()
    deadline = time.monotonic() + spec["deadline_s"]
    receives: list[list[int]] = []
    try:
        while len({b for got in receives for b in got}) < spec["count"] and time.monotonic() < deadline:
            messages = consumer.receive(32, 10)
            if messages:
                receives.append([int(m.body.decode()) for m in messages])
            for msg in messages:
                consumer.ack(msg)
    finally:
        consumer.shutdown()
    print(json.dumps({"receives": receives}))
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
