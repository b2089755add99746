"""The official RocketMQ 5 Python client (gRPC v2) as a chaos workload process.

Run as ``python -m pocketmq.testing.chaos.official_client SPEC_JSON`` (HOME set to a scratch directory: the
client logs under ~). SPEC: {"endpoints": "h:p;h:p", "seed": S, "incarnation": N, "events": PATH,
"settle_file": PATH, "stop_file": PATH}. It sends ``o<N>-<k>`` to the chaos topic (until the settle file
exists) and receives as group ``chaos-official``, doing what ``policy.disposition`` says; every outcome is a
JSON line appended to the events file at once (history.py), so a kill -9 loses at most the line being
written. It runs until the stop file exists; errors are recorded, never fatal.
"""

from __future__ import annotations

import json
import sys
import time
from functools import partial
from pathlib import Path

from pocketmq.testing.chaos.policy import INVISIBLE_MS, NACK_INVISIBLE_MS, OFFICIAL_GROUP, TOPIC, act

SENDS_PER_ROUND = 2
ERROR_PAUSE_S = 0.2


class Events:
    def __init__(self, path: str):
        self._file = open(path, "a", buffering=1)

    def add(self, e: str, **fields) -> None:
        fields.setdefault("t", time.time())
        self._file.write(json.dumps({"e": e, **fields}) + "\n")


def _started(factory, events: Events, what: str, stop: Path):
    """Start a client, retrying while the cluster is unreachable (a partition at start)."""
    while not stop.exists():
        client = factory()
        try:
            client.startup()
            return client
        except Exception as exc:  # the official client raises plain exceptions
            events.add("error", who="official", op=f"start_{what}", error=repr(exc)[:300])
            try:
                client.shutdown()
            except Exception:
                pass
            time.sleep(0.5)
    return None


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
    from rocketmq.v5.exception.client_exception import ClientException  # a status the broker answered

    events = Events(spec["events"])
    stop, settle = Path(spec["stop_file"]), Path(spec["settle_file"])
    config = ClientConfiguration(spec["endpoints"], Credentials(), request_timeout=3)
    producer = _started(lambda: Producer(config, [TOPIC]), events, "producer", stop)
    consumer = _started(
        lambda: SimpleConsumer(config, OFFICIAL_GROUP, {TOPIC: FilterExpression("*")}, await_duration=1),
        events,
        "consumer",
        stop,
    )
    sent = 0
    while not stop.exists():
        settling = settle.exists()
        for _ in range(0 if settling else SENDS_PER_ROUND):
            msg_id = f"o{spec['incarnation']}-{sent}"
            sent += 1
            msg = Message()
            msg.topic, msg.body, msg.keys = TOPIC, msg_id.encode(), msg_id
            try:
                producer.send(msg)
                events.add("send", who="official", id=msg_id, ok=True, status="SEND_OK")
            except Exception as exc:
                events.add("send", who="official", id=msg_id, ok=False, status=repr(exc)[:300])
                break  # no route or no broker: do not spin through the round
        t0 = time.time()
        try:
            received = consumer.receive(16, INVISIBLE_MS // 1000)
        except Exception as exc:
            events.add("error", who="official", op="receive", error=repr(exc)[:300])
            time.sleep(ERROR_PAUSE_S)  # an error can come back at once: a client that spins starves the brokers
            continue
        for msg in received:
            msg_id = msg.body.decode(errors="replace")
            attempt = msg.delivery_attempt
            events.add(
                "deliver",
                group=OFFICIAL_GROUP,
                id=msg_id,
                attempt=attempt,
                broker=str(msg.endpoints),
                topic=msg.topic,
                t0=t0,
            )
            act(
                events.add,
                OFFICIAL_GROUP,
                spec["seed"],
                msg_id,
                attempt,
                settle.exists(),
                ack=partial(consumer.ack, msg),
                nack=partial(consumer.change_invisible_duration, msg, NACK_INVISIBLE_MS // 1000),
                errors=(Exception,),
                unanswered=lambda exc: not isinstance(exc, ClientException),
            )  # the official client raises plain exceptions
    for client in (consumer, producer):
        try:
            client.shutdown()
        except Exception:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
