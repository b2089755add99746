"""Drive the unmodified official RocketMQ 5 Python client's lite producer and consumers in their own process.

Run as ``python lite_official_client.py SPEC_JSON`` with HOME set to a temporary directory. SPEC:
{"endpoint": "127.0.0.1:P", "topic": PARENT, "group": G, "consumer": "simple"|"push", "lites": [L1, ...],
 "unsubscribed": U, "per_lite": N, "deadline_s": D, "send": true}.

It starts the lite consumer, subscribes the lite topics ``lites`` and tries to subscribe ``unsubscribed`` too
(refused when the broker's quota is ``len(lites)``: the client knows the quota from the Settings reply). Unless
"send" is false it then sends ``per_lite`` messages to each of ``lites`` and to ``unsubscribed`` with a Producer
(``message.lite_topic``). It consumes until every message of the subscribed lite topics came (or D passed),
acking each; a simple consumer leaves the first message it receives unacked (invisible 2 s), so it comes back
with delivery attempt 2. It prints one JSON line: the exception that refused the extra subscription (or
null), the sends' count, the dropped body, and per lite topic the bodies in the order they came with their
attempts.
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
        LitePushConsumer,
        LiteSimpleConsumer,
        Message,
        Producer,
    )
    from rocketmq.v5.exception import LiteSubscriptionQuotaExceededException

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=5)
    got: dict[str, list[tuple[str, int]]] = {}
    lock = threading.Lock()

    def record(msg) -> None:
        with lock:
            got.setdefault(msg.lite_topic, []).append((msg.body.decode(), msg.delivery_attempt))

    if spec["consumer"] == "push":

        class Listener:
            def consume(self, message):
                record(message)
                return ConsumeResult.SUCCESS

        consumer = LitePushConsumer(config, spec["group"], spec["topic"], Listener())
    else:
        consumer = LiteSimpleConsumer(spec["topic"], config, spec["group"], await_duration=2)
    consumer.startup()
    # The client's LiteSimpleConsumer.startup() does not wait for the Settings reply (its push consumer does):
    # until the reply came its quota is 0, so the first subscription is retried for a moment.
    settled = time.monotonic() + 5
    while True:
        try:
            consumer.subscribe_lite(spec["lites"][0])
            break
        except LiteSubscriptionQuotaExceededException:
            if time.monotonic() > settled:
                raise
            time.sleep(0.05)
    for lite in spec["lites"][1:]:
        consumer.subscribe_lite(lite)
    over_quota = None
    try:  # the broker's quota is len(lites): the client knows it from the Settings reply
        consumer.subscribe_lite(spec["unsubscribed"])
    except Exception as exc:
        over_quota = type(exc).__name__
    producer = Producer(config, (spec["topic"],))
    producer.startup()
    sent = 0
    for lite in [*spec["lites"], spec["unsubscribed"]] if spec.get("send", True) else []:
        for i in range(spec["per_lite"]):
            msg = Message()
            msg.topic = spec["topic"]
            msg.body = f"{lite}-{i}".encode()
            msg.lite_topic = lite
            producer.send(msg)
            sent += 1
    want = len(spec["lites"]) * spec["per_lite"]
    deadline = time.monotonic() + spec["deadline_s"]
    dropped = None
    try:
        while time.monotonic() < deadline:
            with lock:
                done = sum(1 for bodies in got.values() for _, attempt in bodies if attempt >= 1)
            if done >= want + (1 if dropped else 0):
                break
            if spec["consumer"] == "push":
                time.sleep(0.05)
                continue
            for msg in consumer.receive(16, 2):
                record(msg)
                if dropped is None:
                    dropped = msg.body.decode()  # not acked: comes back after 2 s, before its lite topic goes on
                    continue
                consumer.ack(msg)
        print(
            json.dumps(
                {
                    "over_quota": over_quota,
                    "sent": sent,
                    "dropped": dropped,
                    "got": got,
                }
            ),
            flush=True,
        )
        return 0
    finally:
        producer.shutdown()
        consumer.shutdown()


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
