"""Drive the unmodified official RocketMQ 5 Python client's transactions in its own process.

Run as ``python transaction_official_client.py SPEC_JSON``. SPEC: ``{"endpoint": "127.0.0.1:P", "topic": "t",
"sends": [{"body": "b", "end": "commit" | "rollback" | "none"}], "answers": {body: "COMMIT" | "ROLLBACK" |
"RAISE_ONCE"}, "until_answered": [body, ...], "deadline_s": D, "hang": false}``. Each half message is sent in its own transaction and ended as
its ``end`` says ("none": left open). The checker answers each body as ``answers`` says (RAISE_ONCE: raises the
first time, then COMMIT; a body not named: ROLLBACK). Every event is one JSON line on stdout, flushed:

    {"sent": "b", "message_id": "...", "transaction_id": "..."}   {"ended": "b", "end": "commit"}
    {"checked": "b", "answer": "COMMIT"}                          {"ready": true} (after startup)

Then it stays until its checker has answered (COMMIT or ROLLBACK) a check of every body of ``until_answered``
(or ``deadline_s``, default 30, passed), or forever with ``hang`` (the test kills it).
"""

from __future__ import annotations

import json
import sys
import threading
import time


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main(spec: dict) -> int:
    from rocketmq import (
        ClientConfiguration,
        Credentials,
        Message,
        Producer,
        TransactionChecker,
        TransactionResolution,
    )

    answers = spec.get("answers", {})
    raised: set[str] = set()
    answered: set[str] = set()
    lock = threading.Lock()

    class Checker(TransactionChecker):
        def check(self, message) -> TransactionResolution:
            body = message.body.decode()
            answer = answers.get(body, "ROLLBACK")
            with lock:
                if answer == "RAISE_ONCE" and body not in raised:
                    raised.add(body)
                    emit({"checked": body, "answer": "RAISE"})
                    raise RuntimeError("database unavailable")
            name = "ROLLBACK" if answer == "ROLLBACK" else "COMMIT"
            emit({"checked": body, "answer": name})
            with lock:
                answered.add(body)
            return TransactionResolution.ROLLBACK if name == "ROLLBACK" else TransactionResolution.COMMIT

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=5)
    producer = Producer(config, [spec["topic"]], checker=Checker())
    producer.startup()
    emit({"ready": True})
    try:
        for send in spec.get("sends", []):
            msg = Message()
            msg.topic = spec["topic"]
            msg.body = send["body"].encode()
            msg.tag = "tx"
            msg.keys = send["body"]
            tx = producer.begin_transaction()
            receipt = producer.send(msg, tx)
            emit({"sent": send["body"], "message_id": receipt.message_id, "transaction_id": receipt.transaction_id})
            if send["end"] == "commit":
                tx.commit()
            elif send["end"] == "rollback":
                tx.rollback()
            emit({"ended": send["body"], "end": send["end"]})
        if spec.get("hang"):
            threading.Event().wait()
        deadline = time.monotonic() + spec.get("deadline_s", 30)
        while time.monotonic() < deadline:
            with lock:
                if answered >= set(spec.get("until_answered", [])):
                    break
            time.sleep(0.05)  # polling the checker's answers, which arrive on the client's own threads
    finally:
        producer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
