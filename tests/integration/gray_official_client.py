"""One unmodified official RocketMQ 5 Python SimpleConsumer in its own process, driven line by line.

Run as ``python gray_official_client.py SPEC_JSON`` with HOME set to a temporary directory. SPEC:
{"endpoint": "127.0.0.1:P", "topic": T, "group": G, "invisible_s": S}.

It prints JSON lines on stdout: first ``{"client_id": ...}`` once started, then ``{"body": B, "attempt": A}``
for every message it receives. It acks each message except a body starting with ``hold-`` (never acked) and
a body ending in ``-fail`` on its first attempt (so both come back after the invisible time). A ``stop``
line on stdin makes it shut down (the client tells the broker it terminates) and print ``{"stopped": true}``.
"""

from __future__ import annotations

import json
import sys
import threading


def emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=5)
    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: FilterExpression("*")}, await_duration=1)
    consumer.startup()
    emit({"client_id": consumer.client_id})
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    try:
        while not stop.is_set():
            for msg in consumer.receive(32, spec["invisible_s"]):
                body = msg.body.decode()
                emit({"body": body, "attempt": msg.delivery_attempt})
                if not body.startswith("hold-") and not (body.endswith("-fail") and msg.delivery_attempt == 1):
                    consumer.ack(msg)
    finally:
        consumer.shutdown()
    emit({"stopped": True})
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
