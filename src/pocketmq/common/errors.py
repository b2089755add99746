"""The one exception hierarchy of PocketMQ.

An error says what went wrong, whether a client may retry, and whether it should refresh its route first;
the codes a front end answers with (remoting response code, v2 status) are the protocol's business
(``protocol.error_codes``). Expected outcomes (no message, offset moved) are values, not exceptions.
"""

from __future__ import annotations


class PocketMQError(Exception):
    """Base of every PocketMQ error."""

    retriable: bool = False
    refresh_route: bool = False


class ConfigError(PocketMQError):
    """Invalid configuration; the message lists every problem found, with where each came from."""


class BadRequestError(PocketMQError):
    """A request that cannot be served as asked (bad argument, illegal name ...)."""


class LimitExceededError(BadRequestError):
    """A request over one of the broker's limits (docs/limits.md); ``limit`` names it. The remoting front end
    counts and logs it (rate-limited) with the client's address before answering."""

    def __init__(self, limit: str, message: str):
        super().__init__(message)
        self.limit = limit


class IllegalTopicError(BadRequestError):
    pass


class IllegalQueueIdError(BadRequestError):
    """A queue id outside the topic's queues."""


class SubscriptionParseError(BadRequestError):
    """A subscription expression the broker cannot filter by: a bad one, or SQL92 while property filters are off."""


class IllegalMessageError(BadRequestError):
    pass


class MessageBodyEmptyError(IllegalMessageError):
    pass


class MessageBodyTooLargeError(IllegalMessageError):
    pass


class MessagePropertiesTooLargeError(IllegalMessageError):
    pass


class MessageTypeConflictError(IllegalMessageError):
    """A message of a type its topic does not accept (a delayed message to a NORMAL topic ...)."""


class IllegalLiteTopicError(IllegalMessageError):
    """A lite topic name that is blank, too long or has characters a topic name may not have."""


class LiteTopicQuotaExceededError(PocketMQError):
    """A send that would create a lite topic beyond its parent's limit (``lite_topic_max_per_parent``)."""


class LiteSubscriptionQuotaExceededError(PocketMQError):
    """A lite subscription beyond its consumer group's quota (``lite_subscription_quota``)."""


class IllegalDeliveryTimeError(IllegalMessageError):
    """A delay or delivery time that is not a number, too far ahead or too far in the past."""


class InvalidRecallHandleError(BadRequestError):
    """A recall handle this broker did not issue: malformed, forged, edited, or of another broker or topic."""


class RecallTooLateError(IllegalDeliveryTimeError):
    """A recall of a delayed message whose delivery time has come: it is (or is being) delivered."""


class TopicNotExistError(PocketMQError):
    refresh_route = True


class SubscriptionGroupNotExistError(PocketMQError):
    pass


class InvalidReceiptHandleError(BadRequestError):
    """A receipt handle that is garbage, stale (acked, changed or revived already) or another broker's."""


class NoPermissionError(PocketMQError):
    refresh_route = True


class AccessDeniedError(PocketMQError):
    """Refused by access control: not authenticated (no, unknown, disabled user; bad signature) or not allowed
    (no policy grants the right). The message says which, in RocketMQ's words (docs/security.md)."""


class ServiceNotAvailableError(PocketMQError):
    retriable = True


class SystemBusyError(PocketMQError):
    retriable = True


class NotReplicatedError(PocketMQError):
    """A SYNC_MASTER stored a write (a POP ack, a change of invisible time) but no slave acknowledged it: it
    holds on the master, not yet after a failover. ``slave_in_sync``: a slave was in sync but did not answer in
    time (else none was in sync); the codes are those of the send statuses of the same cases."""

    retriable = True

    def __init__(self, message: str, *, slave_in_sync: bool):
        super().__init__(message)
        self.slave_in_sync = slave_in_sync


class ReplicationRefusedError(PocketMQError):
    """A slave's commit log cannot follow its master's from where it stands: it diverged, is ahead, or ends
    below what the master still has (the master refuses the pull, or the slave refuses to cut its log)."""


class StoreError(PocketMQError):
    """The store could not do what was asked (disk full, I/O error, corrupt file)."""

    retriable = True


class RemotingError(PocketMQError):
    """A remote call failed on the way: connection refused or lost, or a malformed frame."""

    retriable = True
    refresh_route = True


class RemotingTimeoutError(RemotingError):
    """A remote call got no answer in time."""


class ConnectTimeoutError(RemotingTimeoutError):
    """No connection in time: nothing answered the connect (a host that is down, a port whose packets are
    dropped), unlike a server that took the connection and did not reply."""


class ClientError(PocketMQError):
    """Misuse of the SDK (not started, no route for a topic, bad argument)."""


class NoWritableQueueError(ClientError):
    """The topic's route lists no writable queue: a broker group without a master (a failover under way), or a
    topic that takes no writes. A retry asks the name server again first."""

    retriable = True
    refresh_route = True
