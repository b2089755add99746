"""Gray (canary) release marks shared by clients and broker (RocketMQ's RIP-72, with retries that stay gray).

- A **gray client** has ``@gray`` in its client id (``ip@instance@gray``), set by ``ClientConfig``'s
  ``enable_gray_switch``. Brokers and the other consumers of a group recognise it by that mark alone.
- A **gray message** carries the property ``PMQ_GRAY`` (value: the sender's ``gray_tag``, or ``"true"``). A gray
  producer stamps it on every message; any producer may set it by hand so that a gray link of a call chain
  stays gray through the queue. The property travels with the message into ``%RETRY%`` and ``%DLQ%`` copies.
- **Gray retry queue**: the retry topic ``%RETRY%<group>`` of a group with a gray consumer has
  ``GRAY_RETRY_QUEUE_NUMS`` (2) queues per broker; its *last* queue holds the retries of gray messages and the
  others the retries of normal ones. The split is fixed (not the group's ratio) so the broker can place a
  retry without knowing any client setting; consumers split the retry topic with the same rule.
"""

from __future__ import annotations

from typing import Mapping

GRAY_MARK = "@gray"
GRAY_PROPERTY = "PMQ_GRAY"
GRAY_RETRY_QUEUE_NUMS = 2


def is_gray_client(client_id: str) -> bool:
    return GRAY_MARK in client_id


def is_gray_message(properties: Mapping[str, str]) -> bool:
    value = properties.get(GRAY_PROPERTY)
    return bool(value) and value.lower() != "false"


def retry_queue_id(write_queue_nums: int, gray: bool, spread_hash: int) -> int:
    """The retry-topic queue of a retried message: the last queue for a gray message when the topic can be
    split (2 queues or more), else one of the others, chosen by ``spread_hash`` (>= 0)."""
    if write_queue_nums < 2:
        return 0
    if gray:
        return write_queue_nums - 1
    return spread_hash % (write_queue_nums - 1)
