"""The headers of the admin requests about a group's online consumers (docs/protocol.md): resetting its offsets
(INVOKE_BROKER_TO_RESET_OFFSET to a broker, RESET_CONSUMER_CLIENT_OFFSET from the broker to each consumer), and
the requests a broker passes on to one client (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY).

Wire names are RocketMQ's. A reset's ``timestamp`` of ``RESET_TO_LATEST`` means each queue's max offset, as in
RocketMQ; ``RESET_TO_EARLIEST`` (0) finds each queue's min offset, the first message stored at or after it.
"""

from __future__ import annotations

from pocketmq.protocol.headers import RequestHeader, boolean, group_name, int64, text, topic_name
from pocketmq.protocol.request_headers import MESSAGE_ID_MAX_CHARS, NAME_MAX_CHARS, GroupRequestHeader

RESET_TO_LATEST = -1
RESET_TO_EARLIEST = 0


class ResetOffsetRequestHeader(RequestHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET and RESET_CONSUMER_CLIENT_OFFSET."""

    topic: str = topic_name()
    group: str = group_name("group")
    timestamp_ms: int = int64("timestamp", low=RESET_TO_LATEST)
    # False: a queue only moves back (a consumer ahead of the time is left where it is)
    is_force: bool = boolean("isForce", True)


class ClientRequestHeader(GroupRequestHeader):
    """GET_CONSUMER_RUNNING_INFO: the client ``clientId`` of ``consumerGroup`` answers."""

    client_id: str = text("clientId", max_chars=NAME_MAX_CHARS)


class ConsumeMessageDirectlyRequestHeader(ClientRequestHeader):
    """CONSUME_MESSAGE_DIRECTLY: the message ``msgId`` (an offset message id of the broker asked) is handed to that
    client's listener; the broker sends the client the same fields with the message as the body."""

    msg_id: str = text("msgId", max_chars=MESSAGE_ID_MAX_CHARS)
    broker_name: str | None = text("brokerName", None, max_chars=NAME_MAX_CHARS)
