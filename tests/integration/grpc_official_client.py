"""Drive the unmodified official RocketMQ 5 Python client (``rocketmq`` package) in its own process.

Run as ``python grpc_official_client.py SPEC_JSON``; the tests start it with HOME set to a temporary
directory (the client writes its logs under ~/logs and runs its own threads, so it never shares a process
with pytest). Each send's outcome is one JSON line on stdout, flushed at once, so a test that kills the broker
midway still knows exactly which sends returned OK:

    {"i": 7, "ok": true, "message_id": "...", "offset": 3}  (+ "due_ms" for a DELAY message)
    {"i": 8, "ok": false, "error": "..."}

SPEC: {"endpoint": "127.0.0.1:P", "topic": "t", "count": N, "prefix": "n", "groups": G (0: NORMAL),
"declare_topic": true, "stop_after_failures": K (stop once K sends in a row failed; 0: never),
"delay_s": D (send DELAY messages due in D seconds; optional), "body_bytes": B (optional),
"properties": {name: value} (more user properties on every message, e.g. PMQ_GRAY; optional),
"namespace": the client's namespace (optional), "interval_s": a pause between two sends (paces a run that
outlives something the test does meanwhile; optional)}.
The messages are ``expected_message(prefix, i, groups)``: the tests rebuild them to check what was stored.
"""

from __future__ import annotations

import json
import sys
import time


def expected_message(prefix: str, i: int, groups: int) -> dict:
    """The i-th message of a run: body, tag, keys, user properties, message group (None for NORMAL)."""
    return {
        "body": f"{prefix}-{i}".encode(),
        "tag": f"tag{i % 3}",
        "keys": [f"{prefix}-key-{i}", f"{prefix}-alt-{i}"],
        "properties": {"idx": str(i), "run": prefix, "note": "é ü 中"},
        "group": f"{prefix}-group-{i % groups}" if groups else None,
    }


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    config = ClientConfiguration(
        spec["endpoint"], Credentials(), request_timeout=spec.get("timeout_s", 5), namespace=spec.get("namespace", "")
    )
    topics = [spec["topic"]] if spec.get("declare_topic", True) else None
    producer = Producer(config, topics)
    producer.startup()
    failures_in_a_row = 0
    try:
        for i in range(spec["count"]):
            if i and spec.get("interval_s"):
                time.sleep(spec["interval_s"])
            expected = expected_message(spec["prefix"], i, spec.get("groups", 0))
            msg = Message()
            msg.topic = spec["topic"]
            msg.body = b"x" * spec["body_bytes"] if spec.get("body_bytes") else expected["body"]
            msg.tag = expected["tag"]
            for key in expected["keys"]:
                msg.keys = key
            for name, value in {**expected["properties"], **spec.get("properties", {})}.items():
                msg.add_property(name, value)
            if expected["group"]:
                msg.message_group = expected["group"]
            if spec.get("delay_s"):
                msg.delivery_timestamp = int(time.time()) + spec["delay_s"]
            try:
                receipt = producer.send(msg)
            except Exception as exc:  # the outcome is the point: report it and go on
                failures_in_a_row += 1
                code = getattr(exc, "code", None)  # the client's exceptions carry the v2 status code
                code = code if isinstance(code, int) else None
                print(
                    json.dumps({"i": i, "ok": False, "error": f"{type(exc).__name__}: {exc}", "code": code}), flush=True
                )
                if spec.get("stop_after_failures") and failures_in_a_row >= spec["stop_after_failures"]:
                    break
                continue
            failures_in_a_row = 0
            outcome = {"i": i, "ok": True, "message_id": receipt.message_id, "offset": receipt.offset}
            if msg.delivery_timestamp:
                outcome["due_ms"] = msg.delivery_timestamp * 1000  # the client sends whole seconds
            print(json.dumps(outcome), flush=True)
    finally:
        producer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
