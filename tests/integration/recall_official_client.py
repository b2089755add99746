"""Drive the unmodified official RocketMQ 5 Python client's recall API (``Producer.recall_message``).

Run as ``python recall_official_client.py SPEC_JSON`` with HOME set to a temporary directory (the client logs
under ~/logs). Prints one JSON line per send and per recall:

    {"send": i, "message_id": "...", "recall_handle": "...", "due_ms": D}
    {"recall": i, "ok": true, "message_id": "..."} | {"recall": i, "ok": false, "code": 40012, "error": "..."}

SPEC: {"endpoint": "127.0.0.1:P", "topic": "t", "count": N (delayed messages to send, due in "delay_s"
seconds), "recall": [indexes of this run's sends to recall right after sending], "handles": [handles to recall,
e.g. of an earlier run; their index in the output is their position here], "async": true (recall with
``recall_message_async``), "namespace": "ns" (optional)}.
"""

from __future__ import annotations

import json
import sys
import time


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    config = ClientConfiguration(spec["endpoint"], Credentials(), namespace=spec.get("namespace", ""))
    producer = Producer(config, [spec["topic"]])
    producer.startup()
    try:
        handles = list(spec.get("handles", []))
        sent = []
        for i in range(spec.get("count", 0)):
            msg = Message()
            msg.topic = spec["topic"]
            msg.body = f"recall-{i}".encode()
            msg.delivery_timestamp = int(time.time()) + spec["delay_s"]
            receipt = producer.send(msg)
            sent.append(receipt.recall_handle)
            print(
                json.dumps(
                    {
                        "send": i,
                        "message_id": receipt.message_id,
                        "recall_handle": receipt.recall_handle,
                        "due_ms": msg.delivery_timestamp * 1000,
                    }
                ),
                flush=True,
            )
        handles += [sent[i] for i in spec.get("recall", [])]
        for i, handle in enumerate(handles):
            try:
                if spec.get("async"):
                    message_id = producer.recall_message_async(spec["topic"], handle).result(timeout=10)
                else:
                    message_id = producer.recall_message(spec["topic"], handle)
                print(json.dumps({"recall": i, "ok": True, "message_id": message_id}), flush=True)
            except Exception as exc:  # the outcome is the point
                code = getattr(exc, "code", None)
                print(
                    json.dumps(
                        {"recall": i, "ok": False, "code": code if isinstance(code, int) else None, "error": str(exc)}
                    ),
                    flush=True,
                )
    finally:
        producer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
