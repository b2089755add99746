"""Receive and ack with the unmodified official RocketMQ 5 Python client's SimpleConsumer, in its own process.

Run as ``python receive_official_client.py SPEC_JSON`` with HOME set to a temporary directory. SPEC:
{"endpoint": "127.0.0.1:P", "topic": T (or "topics": [T, ...]), "group": G, "count": N, "deadline_s": D,
"invisible_s": S (default 60), "skip_ack": [bodies not to ack] (default none), "linger_s": L (default 0),
"namespace": the client's namespace (default none)}. It
receives and acks (all but the skipped bodies) until N distinct bodies came or D passed, then L seconds more
(whatever else comes), and prints one JSON line: the bodies, their attempts, each body's attempt, the acked
bodies, every delivery (seconds since start, body, attempt) and the start's wall-clock time (``started_at``).

The skipped bodies stay invisible for S seconds from the end of the run, whenever each was received: it
receives with RECEIVE_INVISIBLE_S (longer than any run) and then changes their invisible duration to S. The
official client picks a random queue for every receive (its queue selector is made anew, at a random index,
on each call) and a receive of a drained queue waits its 1 s long poll, so it may reach one broker's queue
seconds after another's; timing the invisible time from each receive would make the un-acked messages come
back at times that depend on that luck, or even during the run.
"""

from __future__ import annotations

import json
import sys
import time

RECEIVE_INVISIBLE_S = 120  # longer than any deadline_s: nothing comes back during the run


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    config = ClientConfiguration(
        spec["endpoint"], Credentials(), request_timeout=5, namespace=spec.get("namespace", "")
    )
    topics = spec.get("topics") or [spec["topic"]]
    consumer = SimpleConsumer(config, spec["group"], {t: FilterExpression("*") for t in topics}, await_duration=1)
    consumer.startup()
    started_at, started = time.time(), time.monotonic()
    deadline = started + spec["deadline_s"]
    skip = set(spec.get("skip_ack", ()))
    got: dict[str, int] = {}
    acked: list[str] = []
    received: list[tuple[float, str, int]] = []
    skipped = []

    def receive_once() -> None:
        for msg in consumer.receive(32, RECEIVE_INVISIBLE_S):
            body = msg.body.decode()
            got[body] = msg.delivery_attempt
            received.append((round(time.monotonic() - started, 2), body, msg.delivery_attempt))
            if body not in skip:
                consumer.ack(msg)
                acked.append(body)
            else:
                skipped.append(msg)

    try:
        while len(got) < spec["count"] and time.monotonic() < deadline:
            receive_once()
        lingered = time.monotonic() + spec.get("linger_s", 0)
        while time.monotonic() < lingered:
            receive_once()
        for msg in skipped:
            consumer.change_invisible_duration(msg, spec.get("invisible_s", 60))
        print(
            json.dumps(
                {
                    "bodies": sorted(got),
                    "attempts": sorted(set(got.values())),
                    "attempt_of": got,
                    "acked": sorted(acked),
                    "received": received,
                    "started_at": started_at,
                }
            ),
            flush=True,
        )
    finally:
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
