"""The unmodified official RocketMQ 5 Python client with ``Credentials(ak, sk)``, in its own process: one send,
then a SimpleConsumer's receive and ack, each step's outcome as a JSON line (``{"step", "ok", "error"}``).

Run as ``python acl_official_client.py SPEC_JSON`` with HOME set to a temporary directory. SPEC: {"endpoint",
"access_key", "secret_key", "topic", "group", "deadline_s"}; a step that fails ends the run (startup included).
"""

from __future__ import annotations

import json
import sys
import time


def report(step: str, error: Exception | None = None) -> None:
    print(json.dumps({"step": step, "ok": error is None, "error": repr(error) if error else None}), flush=True)


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    credentials = Credentials(spec["access_key"], spec["secret_key"])
    config = ClientConfiguration(spec["endpoint"], credentials, request_timeout=5)
    producer = Producer(config, (spec["topic"],))
    try:
        producer.startup()
        msg = Message()
        msg.topic, msg.body = spec["topic"], b"acl"
        producer.send(msg)
        report("send")
    except Exception as exc:
        report("send", exc)
        return 0
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: FilterExpression("*")}, await_duration=1)
    try:
        consumer.startup()
        deadline = time.monotonic() + spec["deadline_s"]
        messages = []
        while not messages and time.monotonic() < deadline:
            messages = consumer.receive(16, 30)
        report("receive", None if messages else TimeoutError("nothing received"))
        for message in messages:
            consumer.ack(message)
        report("ack")
    except Exception as exc:
        report("receive", exc)
    finally:
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
