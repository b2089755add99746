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

import math
import re
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


DEFAULT_GRAY_QUEUE_RATIO = 0.1
_RATIO_IN_ID = re.compile(re.escape(GRAY_MARK) + r"\[([0-9.]+)\]")


def gray_ratio_of(client_id: str) -> float | None:
    """The ratio a RIP-72 client id carries (``ip@pid@gray[0.25]``); None when it carries none or a bad one."""
    match = _RATIO_IN_ID.search(client_id)
    if match is None:
        return None
    try:
        ratio = float(match.group(1))
    except ValueError:
        return None
    return ratio if 0.0 <= ratio <= 1.0 else None


def gray_client_id_suffix(ratio: float) -> str:
    """What a gray client appends to its id: RIP-72's ``@gray[<ratio>]``, so brokers learn the ratio too."""
    return f"{GRAY_MARK}[{ratio:g}]"


def gray_queue_count(queue_nums: int, ratio: float) -> int:
    """How many of a broker's ``queue_nums`` queues of a topic are gray: the last ceil(n * ratio)."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"gray queue ratio {ratio} is outside [0, 1]")
    return math.ceil(queue_nums * ratio)
