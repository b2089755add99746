"""Receive with an SQL92 filter through the unmodified official RocketMQ 5 Python client's SimpleConsumer, in its
own process.

Run as ``python filter_official_client.py SPEC_JSON`` with HOME set to a temporary directory. SPEC:
{"endpoint": "127.0.0.1:P", "topic": T, "group": G, "sql": EXPR, "count": N, "deadline_s": D, "bad_sql": BAD}.
It receives and acks until N messages came or D passed, then one more receive (nothing else may come), and
tries a receive of a second consumer subscribed with the bad expression BAD; prints one JSON line: the bodies
received, the properties of each, and the error the bad expression got (its text, or null when none came).
"""

from __future__ import annotations

import json
import sys
import time


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
    from rocketmq.grpc_protocol import FilterType

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=5)
    sql = FilterExpression(spec["sql"], FilterType.SQL)
    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: sql}, await_duration=1)
    consumer.startup()
    got: dict[str, dict] = {}
    deadline = time.monotonic() + spec["deadline_s"]
    try:
        while len(got) < spec["count"] and time.monotonic() < deadline:
            for msg in consumer.receive(32, 30):
                got[msg.body.decode()] = dict(msg.properties)
                consumer.ack(msg)
        for msg in consumer.receive(32, 30):  # a last look: what did not match must never come
            got[msg.body.decode()] = dict(msg.properties)
    finally:
        consumer.shutdown()
    bad = SimpleConsumer(
        config,
        spec["group"] + "_bad",
        {spec["topic"]: FilterExpression(spec["bad_sql"], FilterType.SQL)},
        await_duration=1,
    )
    bad.startup()
    error = None
    try:
        bad.receive(1, 30)
    except Exception as exc:  # the client raises what the broker answered
        error = str(exc)
    finally:
        bad.shutdown()
    print(json.dumps({"bodies": sorted(got), "properties": got, "error": error}))
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
