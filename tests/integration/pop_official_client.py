"""Drive the unmodified official RocketMQ 5 Python client's SimpleConsumer in its own process.

Run as ``python pop_official_client.py SPEC_JSON`` with HOME set to a temporary directory. SPEC:
{"endpoint": "127.0.0.1:P", "topic": T, "group": G, "count": N, "invisible_s": S, "postpone_s": P, "deadline_s": D}.

It receives until N distinct messages came, acks those whose body ends in an even number, drops the rest,
changes the invisible duration of the first dropped one to P, and receives again until every dropped one came
back (or D passed). It prints one JSON line: first-round attempts, the second-round bodies with their delivery
attempts, and when the postponed one came back (seconds after the change).
"""

from __future__ import annotations

import json
import sys
import time


def number(body: str) -> int:
    """The number a body ends with (``"7"``, ``"n-7"``)."""
    return int(body.rsplit("-", 1)[-1])


def main(spec: dict) -> int:
    from rocketmq import (
        ClientConfiguration,
        Credentials,
        FilterExpression,
        SimpleConsumer,
    )

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=5)
    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: FilterExpression("*")}, await_duration=2)
    consumer.startup()
    deadline = time.monotonic() + spec["deadline_s"]
    try:
        first = {}
        while len(first) < spec["count"] and time.monotonic() < deadline:
            for msg in consumer.receive(32, spec["invisible_s"]):
                first.setdefault(msg.body.decode(), msg)
        dropped = sorted((b for b in first if number(b) % 2), key=number)
        for body, msg in first.items():
            if number(body) % 2 == 0:
                consumer.ack(msg)
        postponed = dropped[0]
        consumer.change_invisible_duration(first[postponed], spec["postpone_s"])
        changed_at = time.monotonic()
        again, postponed_after_s = {}, None
        while set(dropped) - set(again) and time.monotonic() < deadline:
            for msg in consumer.receive(32, 60):
                body = msg.body.decode()
                again[body] = msg.delivery_attempt
                if body == postponed and postponed_after_s is None:
                    postponed_after_s = time.monotonic() - changed_at
                consumer.ack(msg)
        print(
            json.dumps(
                {
                    "first": len(first),
                    "first_attempts": sorted({m.delivery_attempt for m in first.values()}),
                    "again": again,
                    "dropped": dropped,
                    "postponed_after_s": postponed_after_s,
                }
            ),
            flush=True,
        )
    finally:
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
