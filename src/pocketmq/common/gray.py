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
- **Broker placement** (``placement_queues``): when a sender names no queue (official gRPC producers), the
  broker puts a gray message into the topic's gray queues and, when the topic has a gray ratio of its own
  (topic attribute ``gray.queue.ratio``), every other message into the normal queues.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

GRAY_MARK = "@gray"
GRAY_PROPERTY = "PMQ_GRAY"
GRAY_RETRY_QUEUE_NUMS = 2


def is_gray_client(client_id: str) -> bool:
    return GRAY_MARK in client_id


def is_gray_message(properties: Mapping[str, str]) -> bool:
    value = properties.get(GRAY_PROPERTY)
    return value is not None and value != "" and value.lower() != "false"


def retry_queue_id(write_queue_nums: int, gray: bool, spread_hash: int) -> int:
    """The retry-topic queue of a retried message: the last queue for a gray message when the topic can be
    split (2 queues or more), else one of the others, chosen by ``spread_hash`` (>= 0)."""
    if write_queue_nums < 2:
        return 0
    if gray:
        return write_queue_nums - 1
    return spread_hash % (write_queue_nums - 1)


DEFAULT_GRAY_QUEUE_RATIO = 0.1
GRAY_RATIO_ATTRIBUTE = "gray.queue.ratio"  # of a subscription group (broker/gray_split.py) and of a topic
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


def gray_ratio_problem(queue_nums: int, ratio: float) -> str | None:
    """Why a topic of ``queue_nums`` queues (per broker) cannot have gray ratio ``ratio``: a ratio that makes
    every queue gray leaves normal messages nowhere to go and normal consumers nothing to read. None when it can
    (ratio 0, no gray queue, ends a rollout)."""
    if gray_queue_count(queue_nums, ratio) < queue_nums:
        return None
    return (
        f"{GRAY_RATIO_ATTRIBUTE}={ratio:g} makes all {queue_nums} queues gray (the last ceil({queue_nums} * "
        f"{ratio:g})), leaving none for normal messages: use a smaller ratio or more queues"
    )


def parse_gray_ratio(text: str) -> float:
    """A ratio setting (``gray.queue.ratio``): a number in [0, 1], else ValueError saying so."""
    try:
        ratio = float(text)
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:  # also refuses nan
        raise ValueError(f"{GRAY_RATIO_ATTRIBUTE}={text!r} is not a ratio in [0, 1]")
    return ratio


def placement_queues(queue_nums: int, topic_ratio: float | None, gray: bool) -> range:
    """The queues the broker may put a new message in when its sender names none.

    A gray message goes to the topic's gray queues (the last ceil(n * ratio); ``topic_ratio`` None: the
    default 0.1 that clients use). Any other message keeps out of them only when the topic has a ratio of its
    own (it takes part in gray release: opt-in, like the SDK's ``GraySelector`` for normal producers), else it
    may go anywhere. When the ratio leaves no gray queue or no normal queue the split cannot apply: every queue
    (the broker never refuses a send for it, where the SDK's selector raises)."""
    if not gray and topic_ratio is None:
        return range(queue_nums)
    gray_count = gray_queue_count(queue_nums, DEFAULT_GRAY_QUEUE_RATIO if topic_ratio is None else topic_ratio)
    if gray_count in (0, queue_nums):
        return range(queue_nums)
    first_gray = queue_nums - gray_count
    return range(first_gray, queue_nums) if gray else range(first_gray)
