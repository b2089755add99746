"""A PocketMQ SDK transactional producer in its own process, for tests that kill it mid-transaction.

Run as ``python transaction_sdk_client.py NAMESRV TOPIC GROUP COUNT``: sends COUNT half messages (bodies
``crash-<i>``), printing ``HALF <transaction id>`` (flushed) for each from inside its local transaction, which
then never returns for the last one: the process hangs there until killed, so that half message has no ending.
"""

from __future__ import annotations

import sys
import threading

from pocketmq.client import ClientConfig, LocalTransactionState, Message, ProducerOptions, TransactionProducer


def main(namesrv: str, topic: str, group: str, count: int) -> None:
    sent = 0

    def execute(message: Message, arg: object) -> LocalTransactionState:
        nonlocal sent
        sent += 1
        print(f"HALF {message.uniq_key}", flush=True)
        if sent == count:
            threading.Event().wait()  # the local transaction never ends: the test kills this process now
        return LocalTransactionState.UNKNOWN

    producer = TransactionProducer(
        ClientConfig(namesrv_addr=namesrv),
        ProducerOptions(group=group),
        executor=execute,
        checker=lambda message: LocalTransactionState.UNKNOWN,
        topics=[topic],
    ).start()
    for i in range(count):
        producer.send_in_transaction(Message.create(topic, f"crash-{i}"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
