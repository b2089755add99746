"""Namespaces on the remoting wire: a topic or group ``name`` of namespace ``ns`` is the broker's ``ns%name``.

These are the rules of RocketMQ's remoting clients (their ``NamespaceUtil``), so that a PocketMQ client and a
RocketMQ 4.x/5.x client of one namespace meet in the same topics and groups:

- the retry and dead-letter topics of a group keep their prefix in front: ``%RETRY%ns%group``, ``%DLQ%ns%group``;
- system topics (``TBW102``, ``SCHEDULE_TOPIC_XXXX``, ``rmq_sys_*``, ``RMQ_SYS_*``) and system groups
  (``CID_RMQ_SYS_*``) belong to no namespace and are left alone;
- a name that already carries the namespace is not wrapped again, so wrapping twice is harmless;
- ``unwrap`` strips only this namespace: a name of another namespace, or of none, comes back as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from pocketmq.common.message import Message, MessageQueue
from pocketmq.common.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, is_system_topic

SEPARATOR = "%"
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"
_GROUP_TOPIC_PREFIXES = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)
M = TypeVar("M", bound=Message)


def namespace_problem(namespace: str) -> str | None:
    """Why ``namespace`` cannot be one ("" is no namespace, which is fine), or None."""
    if namespace and (SEPARATOR in namespace or not all(c.isalnum() or c in "_-" for c in namespace)):
        return f"namespace {namespace!r} has characters outside [a-zA-Z0-9_-]"
    return None


def is_system_resource(name: str) -> bool:
    return is_system_topic(name) or name.startswith(SYSTEM_GROUP_PREFIX)


def _split_group_prefix(name: str) -> tuple[str, str]:
    """(``%RETRY%`` or ``%DLQ%`` or "", the rest)."""
    for prefix in _GROUP_TOPIC_PREFIXES:
        if name.startswith(prefix):
            return prefix, name[len(prefix) :]
    return "", name


def wrap(namespace: str, name: str) -> str:
    """The broker's name of ``name`` (a topic or group) in ``namespace``."""
    if not namespace or not name or is_system_resource(name):
        return name
    prefix, rest = _split_group_prefix(name)
    if rest.startswith(namespace + SEPARATOR):
        return name
    return f"{prefix}{namespace}{SEPARATOR}{rest}"


def unwrap(namespace: str, name: str) -> str:
    """The name users of ``namespace`` know for the broker's ``name``."""
    if not namespace or not name:
        return name
    prefix, rest = _split_group_prefix(name)
    own = namespace + SEPARATOR
    return prefix + rest[len(own) :] if rest.startswith(own) else name


@dataclass(frozen=True, slots=True)
class Namespace:
    """One client's namespace, applied to names on their way to the broker and stripped on their way back."""

    name: str = ""

    def wrap(self, resource: str) -> str:
        return wrap(self.name, resource)

    def unwrap(self, resource: str) -> str:
        return unwrap(self.name, resource)

    def wrap_queue(self, mq: MessageQueue) -> MessageQueue:
        return mq if not self.name else MessageQueue(self.wrap(mq.topic), mq.broker_name, mq.queue_id)

    def unwrap_queue(self, mq: MessageQueue) -> MessageQueue:
        return mq if not self.name else MessageQueue(self.unwrap(mq.topic), mq.broker_name, mq.queue_id)

    def unwrap_message(self, msg: M) -> M:
        """``msg`` (changed in place) with its topic as users of the namespace know it."""
        msg.topic = self.unwrap(msg.topic)
        return msg
