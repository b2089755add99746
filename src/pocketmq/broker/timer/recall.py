"""Recall handles: what a send receipt of a delayed message carries so its producer can cancel it before it is due.

A handle is RocketMQ 5's ``v1`` layout with one more field: URL-safe base64 of the space-separated text
``v1 <topic> <broker name> <deliver ms> <message id> <timer queue offset>.<signature>``. RocketMQ's own clients
read only the first five fields (they pick the broker to ask by its name), so they take PocketMQ's handles as
their own. The sixth field says which timer record to cancel and signs the whole: an HMAC-SHA256 (first 16
bytes, URL-safe base64) under the broker's recall secret, so a handle cannot be forged or edited to cancel
another producer's message (a topic, time or offset changed in it no longer matches its signature).

The secret is random, made at the broker's first start and kept in its metadata folder: handles stay valid
across restarts. Pure: nothing here reads a clock or a file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

from pocketmq.common.errors import InvalidRecallHandleError

_VERSION = "v1"
_SIGNATURE_BYTES = 16
MAX_HANDLE_CHARS = 1024  # a handle is ~200 characters; anything much longer is not one


@dataclass(frozen=True, slots=True)
class RecallTarget:
    """What a valid handle names: the delayed message and the timer record that holds it."""

    topic: str
    broker_name: str
    deliver_ms: int
    message_id: str
    timer_queue_offset: int


class RecallHandles:
    """Issues and opens the recall handles of one broker."""

    def __init__(self, secret: bytes, broker_name: str):
        if len(secret) < 16:
            raise ValueError("a recall secret needs at least 16 bytes")
        self._secret = secret
        self.broker_name = broker_name

    def issue(self, topic: str, deliver_ms: int, message_id: str, timer_queue_offset: int) -> str:
        fields = f"{_VERSION} {topic} {self.broker_name} {deliver_ms} {message_id} {timer_queue_offset}"
        raw = f"{fields}.{self._sign(fields)}"
        return base64.urlsafe_b64encode(raw.encode()).decode()

    def open(self, handle: str, topic: str | None = None) -> RecallTarget:
        """The target of ``handle``; InvalidRecallHandleError unless this broker issued it (for ``topic``, when
        given: the topic a recall request names must be the handle's)."""
        if not handle or len(handle) > MAX_HANDLE_CHARS:
            raise InvalidRecallHandleError("recall handle is invalid")
        try:
            raw = base64.urlsafe_b64decode(handle.encode()).decode()
        except (binascii.Error, ValueError):
            raise InvalidRecallHandleError("recall handle is invalid: not URL-safe base64") from None
        fields, _, signature = raw.rpartition(".")
        items = fields.split(" ")
        if len(items) != 6 or items[0] != _VERSION:
            raise InvalidRecallHandleError("recall handle is invalid: not a handle of this broker")
        if not hmac.compare_digest(signature, self._sign(fields)):
            raise InvalidRecallHandleError("recall handle is invalid: its signature does not match")
        _, handle_topic, broker_name, deliver_ms, message_id, queue_offset = items
        if broker_name != self.broker_name:  # signed by a broker of the same secret: a copied data folder
            raise InvalidRecallHandleError(f"recall handle belongs to broker {broker_name}, not {self.broker_name}")
        if topic is not None and topic != handle_topic:
            raise InvalidRecallHandleError(f"recall handle belongs to topic {handle_topic}, not {topic}")
        return RecallTarget(handle_topic, broker_name, int(deliver_ms), message_id, int(queue_offset))

    def _sign(self, fields: str) -> str:
        digest = hmac.new(self._secret, fields.encode(), hashlib.sha256).digest()[:_SIGNATURE_BYTES]
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def __repr__(self) -> str:
        return f"<RecallHandles broker={self.broker_name}>"
