"""What the harness reads from the cluster for the checkers: dead letters (with references resolved to the
message they name), the messages stored in the workload's topics, and the brokers' revive metrics from their
``/metrics`` endpoints."""

from __future__ import annotations

import re
import time
import urllib.request

from pocketmq.client import ClientConfig, PullConsumer, PullStatus
from pocketmq.common.dead_letter_reference import REFERENCE_TOPIC, STATE_RESOLVED, DeadLetterReference, fold
from pocketmq.common.errors import PocketMQError
from pocketmq.common.message import MessageExt, MessageQueue
from pocketmq.testing.chaos.checkers import DeadLetter, MetricSample, StoredMessage

DLQ_REASON_PROPERTY = "PMQ_DLQ_REASON"
_READER_GROUP = "chaos-dlq-reader"
# Revive passes that closed nothing (idle or blocked): those come one an interval at most; a pass that closed
# CKs is paced by the CKs coming due (a wake-up at the tick of the earliest: docs/pop.md).
_REVIVE_PASSES = re.compile(
    r'^pocketmq_background_passes_total\{(?=[^}]*service="revive")(?=[^}]*result="(?:idle|blocked)")[^}]*\} (\S+)$',
    re.M,
)
_REWRITE_ATTEMPT = re.compile(r'^pocketmq_pop_ck_rewrites_total\{[^}]*attempt="(\d+)"[^}]*\} (\S+)$', re.M)


def _pull_all(consumer: PullConsumer, queue: MessageQueue) -> list[MessageExt]:
    messages: list[MessageExt] = []
    offset = consumer.min_offset(queue)
    while True:
        result = consumer.pull(queue, offset, 32)
        if result.status is not PullStatus.FOUND or not result.messages:
            return messages
        messages.extend(result.messages)
        offset = result.next_begin_offset


def _referenced_id(consumer: PullConsumer, ref: DeadLetterReference) -> str | None:
    try:
        result = consumer.pull(MessageQueue(ref.topic, ref.broker_name, ref.queue_id), ref.queue_offset, 1)
    except PocketMQError:
        return None
    if result.status is PullStatus.FOUND and result.messages:
        return result.messages[0].body.decode(errors="replace")
    return None


def dead_letters(namesrv_addr: str, groups: tuple[str, ...]) -> list[DeadLetter]:
    """Every entry of ``%DLQ%<group>`` on every broker group, and the groups' references not resolved yet; raises
    PocketMQError when a DLQ that exists cannot be read."""
    found = []
    with PullConsumer(_READER_GROUP, ClientConfig(namesrv_addr=namesrv_addr)) as consumer:
        for group in groups:
            try:
                queues = consumer.fetch_queues(f"%DLQ%{group}")
            except PocketMQError:
                continue  # no route: nothing was dead-lettered for this group
            for queue in queues:
                for msg in _pull_all(consumer, queue):
                    ref = DeadLetterReference.of_message(msg.properties, msg.body)
                    msg_id = _referenced_id(consumer, ref) if ref else msg.body.decode(errors="replace")
                    reason = msg.properties.get(DLQ_REASON_PROPERTY) or (ref.reason if ref else None)
                    found.append(DeadLetter(group, msg_id, reason, queue.broker_name))
        found += _open_references(consumer, groups)
    return found


def _open_references(consumer: PullConsumer, groups: tuple[str, ...]) -> list[DeadLetter]:
    """The references of ``groups`` whose real dead letter is not written yet (those live apart from the DLQs:
    common/dead_letter_reference.py), each as the dead letter it stands for."""
    try:
        queues = consumer.fetch_queues(REFERENCE_TOPIC)
    except PocketMQError:
        return []
    found = []
    for queue in queues:
        for state in fold(_pull_all(consumer, queue)).values():
            ref = state.reference
            if ref.group in groups and state.state != STATE_RESOLVED:
                found.append(DeadLetter(ref.group, _referenced_id(consumer, ref), ref.reason, queue.broker_name))
    return found


def stored_messages(namesrv_addr: str, topics: list[str]) -> list[StoredMessage]:
    """Every message of ``topics`` on every broker group (a topic without a route holds none); raises
    PocketMQError when a queue that exists cannot be read."""
    found = []
    with PullConsumer(_READER_GROUP, ClientConfig(namesrv_addr=namesrv_addr)) as consumer:
        for topic in topics:
            try:
                queues = consumer.fetch_queues(topic)
            except PocketMQError:
                continue
            for queue in queues:
                found += [
                    StoredMessage(topic, msg.body.decode(errors="replace"), msg.reconsume_times)
                    for msg in _pull_all(consumer, queue)
                ]
    return found


def metric_sample(broker: str, pid: int, metrics_addr: str, timeout_s: float = 2.0) -> MetricSample | None:
    """The revive counters of one broker process now, or None when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://{metrics_addr}/metrics", timeout=timeout_s) as reply:
            text = reply.read().decode()
    except OSError:
        return None
    passes = sum(float(v) for v in _REVIVE_PASSES.findall(text))
    attempts = [int(a) for a, count in _REWRITE_ATTEMPT.findall(text) if float(count) > 0]
    return MetricSample(time.time(), broker, pid, passes, max(attempts, default=0))
