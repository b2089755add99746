"""Send and receive with the unmodified official RocketMQ 5 Python client, over TLS or plaintext, in its own process.

Run as ``python tls_official_client.py SPEC_JSON`` with HOME set to a temporary directory and, for TLS,
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` naming the CA (the client checks the server's certificate and host name).
SPEC: {"endpoint": "127.0.0.1:P", "topic": T, "group": G, "count": N, "tls": bool, "deadline_s": D}. It sends N
messages (``Producer(..., tls_enable=...)``), receives and acks them with a ``SimpleConsumer`` (same switch)
until all came or D passed, and prints one JSON line: {"sent": [bodies], "received": [bodies]}; an error is
{"error": "..."} and exit status 1.
"""

from __future__ import annotations

import json
import sys
import time


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=5)
    tls = spec["tls"]
    sent: list[str] = []
    received: set[str] = set()
    producer = Producer(config, [spec["topic"]], tls_enable=tls)
    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: FilterExpression("*")}, 1, tls_enable=tls)
    try:
        producer.startup()
        consumer.startup()
        for i in range(spec["count"]):
            msg = Message()
            msg.topic = spec["topic"]
            msg.body = f"{spec['topic']}-{i}".encode()
            producer.send(msg)
            sent.append(msg.body.decode())
        deadline = time.monotonic() + spec["deadline_s"]
        while len(received) < len(sent) and time.monotonic() < deadline:
            for got in consumer.receive(16, 30):
                received.add(got.body.decode())
                consumer.ack(got)
    except Exception as exc:  # the outcome is the point: report it
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "sent": sent}), flush=True)
        return 1
    finally:
        for client in (producer, consumer):
            try:
                client.shutdown()
            except Exception:
                pass
    print(json.dumps({"sent": sent, "received": sorted(received)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
