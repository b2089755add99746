"""Topic and group naming rules, message types, permissions, the names of system topics, and the rule of what an
unknown topic's first send or route query creates (``auto_create_decision``, shared by the broker and the name
server)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
# Matched whole (fullmatch): with re.match, "$" also matches before a trailing newline, which let "name\n" in.
NAME_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+")

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
DEFAULT_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
# The group RocketMQ's admin tools read under (``pocketmq tail``): a reader, never a member. A broker keeps no
# trace of it: it creates neither a subscription group nor a retry topic for it.
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
# Tags of the revive topic's records (RocketMQ's PopAckConstants): a checkpoint, an ack of one message, of several.
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"

# Permission bits, as RocketMQ's PermName.
PERM_INHERIT = 0x1
PERM_WRITE = 0x2
PERM_READ = 0x4
PERM_READ_WRITE = PERM_READ | PERM_WRITE

# Retry and dead-letter topics have one queue, as RocketMQ's retryQueueNums default and DLQ (#2436).
GROUP_TOPIC_QUEUE_NUMS = 1


class MessageType(enum.Enum):
    """What a topic accepts. A MIXED topic accepts every type (as RocketMQ 5 treats an untyped topic)."""

    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    PRIORITY = "PRIORITY"
    LITE = "LITE"  # a parent of lite topics (docs/lite.md): only messages that name a lite topic
    MIXED = "MIXED"

    def accepts(self, message_type: MessageType) -> bool:
        # A lite message needs its lite parent: elsewhere nobody could consume it by its lite topic.
        if message_type is MessageType.LITE:
            return self is MessageType.LITE
        return self is MessageType.MIXED or self is message_type

    @classmethod
    def parse(cls, text: str) -> MessageType:
        try:
            return cls(text.upper())
        except ValueError:
            names = "|".join(t.value.lower() for t in cls)
            raise ValueError(f"unknown message type {text!r} (expected {names})") from None


def priority_queue_id(priority: int, queue_nums: int) -> int:
    """The queue of a priority message (RocketMQ's RIP-80): queue *n* holds level *n*, and a level above the
    topic's last queue is the highest there is."""
    return min(priority, queue_nums - 1)


def _name_problem(kind: str, name: str, max_length: int) -> str | None:
    if not name or not name.strip():
        return f"{kind} name is blank"
    if len(name) > max_length:
        return f"{kind} name is longer than {max_length} characters"
    if not NAME_PATTERN.fullmatch(name):
        return f"{kind} name {name!r} has characters outside [%|a-zA-Z0-9_-]"
    return None


def topic_name_problem(topic: str) -> str | None:
    """Why ``topic`` is not a legal topic name, or None when it is."""
    return _name_problem("topic", topic, TOPIC_MAX_LENGTH)


LITE_TOPIC_MAX_LENGTH = 64  # RocketMQ 5's default max lite topic size (the Settings' max_lite_topic_size)


def lite_topic_name_problem(lite_topic: str, max_length: int = LITE_TOPIC_MAX_LENGTH) -> str | None:
    """Why ``lite_topic`` is not a legal lite topic name (the characters of a topic name), or None."""
    return _name_problem("lite topic", lite_topic, max_length)


def group_name_problem(group: str) -> str | None:
    return _name_problem("group", group, GROUP_MAX_LENGTH)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def pop_retry_topic(group: str, topic: str) -> str:
    """The POP retry topic (RocketMQ's V1 form)."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def is_system_topic(topic: str) -> bool:
    return topic.startswith(("rmq_sys_", "RMQ_SYS_")) or topic in (SCHEDULE_TOPIC, DEFAULT_TOPIC)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic on one broker: its queue numbers, permission, message type and gray ratio (docs/gray.md)."""

    name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = PERM_READ_WRITE
    message_type: MessageType = MessageType.MIXED
    order: bool = False
    gray_queue_ratio: float | None = None  # attribute gray.queue.ratio: the topic takes part in gray release

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)


def is_group_topic(topic: str) -> bool:
    """A %RETRY%<group> or %DLQ%<group> topic, created on demand whatever the auto-create setting."""
    return any(
        topic.startswith(prefix) and len(topic) > len(prefix)
        for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)
    )


def auto_create_decision(topic: str, *, auto_create_enabled: bool, default_queue_nums: int) -> TopicConfig | None:
    """What to create for an unknown ``topic`` on its first send or route query, or None to refuse.

    Retry and DLQ topics of a group are always created (1 queue, read-write); other legal, non-system
    names only when auto-creation is on, with ``default_queue_nums`` queues accepting every message type.
    """
    if topic_name_problem(topic) is not None:
        return None
    if is_group_topic(topic):
        return TopicConfig(topic, GROUP_TOPIC_QUEUE_NUMS, GROUP_TOPIC_QUEUE_NUMS, PERM_READ_WRITE)
    if not auto_create_enabled or is_system_topic(topic):
        return None
    return TopicConfig(topic, default_queue_nums, default_queue_nums, PERM_READ_WRITE, MessageType.MIXED)
