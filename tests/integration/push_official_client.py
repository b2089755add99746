"""Drive the unmodified official RocketMQ 5 Python client's PushConsumer in its own process.

Run as ``python push_official_client.py SPEC_JSON`` with HOME set to a temporary directory. SPEC:
{"endpoint": "127.0.0.1:P", "topic": T, "group": G, "expect": N, "mode": M, "deadline_s": D, "idle_s": I,
"namespace": NS (optional)}.

Modes of the listener:
- ``ok``: every message succeeds;
- ``fail``: every message fails (the broker must dead-letter each after the group's max attempts);
- ``fail_first``: a message fails on its first delivery attempt and succeeds on the next.

It runs until N messages were consumed successfully (``ok``/``fail_first``) or, for ``fail``, until no
listener call came for I seconds; or until D passed. It prints one JSON line: the successful bodies in
consumption order, each listener call's (body, delivery attempt, message group), the most listener calls
running at once overall and per message group, and the settings the broker pushed (fifo, max attempts).
"""

from __future__ import annotations

import json
import sys
import threading
import time


def main(spec: dict) -> int:
    from rocketmq import (
        ClientConfiguration,
        ConsumeResult,
        Credentials,
        FilterExpression,
        MessageListener,
        PushConsumer,
    )

    lock = threading.Lock()
    calls, consumed = [], []
    running = {"all": 0, "max_all": 0, "groups": {}, "max_group": 0}
    last_call = [time.monotonic()]
    seen_attempts: dict[str, int] = {}

    class Listener(MessageListener):
        def consume(self, message):
            body = message.body.decode()
            group = message.message_group or ""
            with lock:
                last_call[0] = time.monotonic()
                calls.append([body, message.delivery_attempt, group])
                running["all"] += 1
                running["max_all"] = max(running["max_all"], running["all"])
                running["groups"][group] = running["groups"].get(group, 0) + 1
                running["max_group"] = max(running["max_group"], running["groups"][group])
                local_attempt = seen_attempts[body] = seen_attempts.get(body, 0) + 1
            try:
                time.sleep(spec.get("work_s", 0.01))  # long enough for concurrent calls to overlap
                if spec["mode"] == "fail" or (spec["mode"] == "fail_first" and local_attempt == 1):
                    return ConsumeResult.FAILURE
                with lock:
                    consumed.append(body)
                return ConsumeResult.SUCCESS
            finally:
                with lock:
                    running["all"] -= 1
                    running["groups"][group] -= 1

    config = ClientConfiguration(
        spec["endpoint"], Credentials(), request_timeout=5, namespace=spec.get("namespace", "")
    )
    consumer = PushConsumer(
        config,
        spec["group"],
        Listener(),
        {spec["topic"]: FilterExpression("*")},
        consumption_thread_count=spec.get("threads", 8),
    )
    consumer.startup()
    deadline = time.monotonic() + spec["deadline_s"]
    try:
        while time.monotonic() < deadline:
            with lock:
                done = (
                    len(set(consumed)) >= spec["expect"]
                    if spec["mode"] != "fail"
                    else (
                        len({c[0] for c in calls}) >= spec["expect"]
                        and time.monotonic() - last_call[0] > spec.get("idle_s", 3)
                    )
                )
            if done:
                break
            time.sleep(0.05)
        settings = {"fifo": consumer.fifo}
        with lock:
            print(
                json.dumps(
                    {
                        "consumed": consumed,
                        "calls": calls,
                        "max_running": running["max_all"],
                        "max_running_per_group": running["max_group"],
                        "settings": settings,
                    }
                ),
                flush=True,
            )
    finally:
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
