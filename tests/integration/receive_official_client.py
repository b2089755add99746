"""Receive and ack with the unmodified official RocketMQ 5 Python client's SimpleConsumer, in its own process.

Run as ``python receive_official_client.py SPEC_JSON`` with HOME set to a temporary directory. SPEC:
{"endpoint": "127.0.0.1:P", "topic": T, "group": G, "count": N, "deadline_s": D}. It receives (invisible 60 s)
and acks until N distinct bodies came or D passed, and prints one JSON line: the bodies and their attempts.
"""

from __future__ import annotations

import json
import sys
import time


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=5)
    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: FilterExpression("*")}, await_duration=1)
    consumer.startup()
    deadline = time.monotonic() + spec["deadline_s"]
    got: dict[str, int] = {}
    try:
        while len(got) < spec["count"] and time.monotonic() < deadline:
            for msg in consumer.receive(32, 60):
                got[msg.body.decode()] = msg.delivery_attempt
                consumer.ack(msg)
        print(json.dumps({"bodies": sorted(got), "attempts": sorted(set(got.values()))}), flush=True)
    finally:
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
