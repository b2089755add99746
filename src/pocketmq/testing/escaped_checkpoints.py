"""CKs in one broker's revive queue for messages stored on another broker group, for tests and benches.

In a running cluster such CKs arrive through the escape bridge: a slave acting master of group A pops A's
messages but cannot write its CKs locally, so they go to a master of another group B (RIP-32's
``putMessageToSpecificQueue``), naming broker A. Without that bridge, a test puts the same records there
itself: ``append_checkpoints`` appends them to a running in-process broker's revive queue through the normal
revive-queue path (``ReviveQueue.append``), and ``seed_checkpoints`` does it to the data directory of a broker
*process* before it starts (through an in-process broker on that directory, so the records are exactly what
the broker would have written). The revive service then finds them like any CK of its own.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from pocketmq.broker.pop.checkpoint import PopCheckpoint
from pocketmq.broker.pop.revive_queue import ReviveQueue
from pocketmq.common.topic import revive_topic

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


def remote_checkpoints(
    topic: str,
    group: str,
    broker_name: str,
    queue_offsets: dict[int, list[int]],
    *,
    pop_time_ms: int,
    invisible_ms: int,
    per_ck: int = 32,
) -> list[PopCheckpoint]:
    """CKs of ``group`` for the messages at ``queue_offsets`` (queue id -> offsets) of ``topic`` on broker
    group ``broker_name``, up to ``per_ck`` messages each, spread over the revive queues like pops are."""
    cks: list[PopCheckpoint] = []
    for queue_id, offsets in sorted(queue_offsets.items()):
        for start in range(0, len(offsets), per_ck):
            cks.append(
                PopCheckpoint.of_offsets(
                    topic,
                    group,
                    queue_id,
                    offsets[start : start + per_ck],
                    pop_time_ms,
                    invisible_ms,
                    broker_name,
                    revive_queue_id=len(cks) % 8,
                )
            )
    return cks


async def append_checkpoints(broker: Broker, cks: list[PopCheckpoint]) -> None:
    """Append ``cks`` to the revive queues of the running in-process ``broker`` (``pocketmq.broker.Broker``)."""
    topic = revive_topic(broker.config.cluster_name)
    queues: dict[int, list[PopCheckpoint]] = {}
    for ck in cks:
        queues.setdefault(ck.revive_queue_id, []).append(ck)
    for queue_id, of_queue in queues.items():
        queue = ReviveQueue(broker.store, topic, queue_id, broker.broker_name, 0)
        for start in range(0, len(of_queue), 256):
            await queue.append(of_queue[start : start + 256])


async def seed_checkpoints(data_dir: Path, *, cluster_name: str, broker_name: str, cks: list[PopCheckpoint]) -> None:
    """Write ``cks`` into the (stopped) broker's ``data_dir`` (what ``pocketmq serve --data-dir`` uses)."""
    from pocketmq.broker.broker import Broker
    from pocketmq.broker.config import BrokerConfig

    config = dataclasses.replace(
        BrokerConfig(data_dir=Path(data_dir), remoting_port=0, grpc_port=0),
        cluster_name=cluster_name,
        broker_name=broker_name,
        pop_revive_interval_ms=3_600_000,
    )
    broker = Broker(config)
    await broker.start()
    try:
        await append_checkpoints(broker, cks)
    finally:
        await broker.shutdown()
