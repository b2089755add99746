"""The one exception hierarchy of PocketMQ.

Broker-side errors carry the remoting response code they answer with, the v2 status code, whether a client
may retry, and whether it should refresh its route first. Expected outcomes (no message, offset moved) are
values, not exceptions.
"""

from __future__ import annotations

from pocketmq.protocol.codes import ResponseCode


class PocketMQError(Exception):
    """Base of every PocketMQ error."""

    response_code: int = ResponseCode.SYSTEM_ERROR
    v2_code: int = 50001  # INTERNAL_SERVER_ERROR
    retriable: bool = False
    refresh_route: bool = False

    def __init__(self, message: str = "", *, response_code: int | None = None, v2_code: int | None = None):
        super().__init__(message)
        if response_code is not None:
            self.response_code = response_code
        if v2_code is not None:
            self.v2_code = v2_code


class ConfigError(PocketMQError):
    """Invalid configuration; the message lists every problem found, with where each came from."""


class BadRequestError(PocketMQError):
    """A request that cannot be served as asked (bad argument, illegal name ...)."""

    response_code = ResponseCode.INVALID_PARAMETER
    v2_code = 40000  # BAD_REQUEST


class LimitExceededError(BadRequestError):
    """A request over one of the broker's limits (docs/limits.md); ``limit`` names it. The remoting front end
    counts and logs it (rate-limited) with the client's address before answering."""

    def __init__(self, limit: str, message: str, **codes):
        super().__init__(message, **codes)
        self.limit = limit


class IllegalTopicError(BadRequestError):
    v2_code = 40002


class IllegalMessageError(BadRequestError):
    response_code = ResponseCode.MESSAGE_ILLEGAL


class TopicNotExistError(PocketMQError):
    response_code = ResponseCode.TOPIC_NOT_EXIST
    v2_code = 40402
    refresh_route = True


class SubscriptionGroupNotExistError(PocketMQError):
    response_code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    v2_code = 40403


class InvalidReceiptHandleError(BadRequestError):
    """A receipt handle that is garbage, stale (acked, changed or revived already) or another broker's."""

    v2_code = 40013  # INVALID_RECEIPT_HANDLE


class NoPermissionError(PocketMQError):
    response_code = ResponseCode.NO_PERMISSION
    v2_code = 40300  # FORBIDDEN
    refresh_route = True


class ServiceNotAvailableError(PocketMQError):
    response_code = ResponseCode.SERVICE_NOT_AVAILABLE
    v2_code = 50001
    retriable = True


class SystemBusyError(PocketMQError):
    response_code = ResponseCode.SYSTEM_BUSY
    v2_code = 42900  # TOO_MANY_REQUESTS
    retriable = True


class NotReplicatedError(PocketMQError):
    """A SYNC_MASTER stored a write (a POP ack, a change of invisible time) but no slave acknowledged it: it
    holds on the master, not yet after a failover. The codes of the send statuses of the same cases."""

    retriable = True

    def __init__(self, message: str, *, slave_in_sync: bool):
        super().__init__(
            message,
            response_code=ResponseCode.FLUSH_SLAVE_TIMEOUT if slave_in_sync else ResponseCode.SLAVE_NOT_AVAILABLE,
            v2_code=50402 if slave_in_sync else 50002,
        )  # SLAVE_PERSISTENCE_TIMEOUT / HA_NOT_AVAILABLE
        self.handle = None  # a change of invisible time: the new receipt handle, valid on the master


class StoreError(PocketMQError):
    """The store could not do what was asked (disk full, I/O error, corrupt file)."""

    response_code = ResponseCode.SYSTEM_ERROR
    retriable = True


class RemotingError(PocketMQError):
    """A remote call failed on the way: connection refused or lost, or a malformed frame."""

    retriable = True
    refresh_route = True


class RemotingTimeoutError(RemotingError):
    """A remote call got no answer in time."""


class RemoteServerError(PocketMQError):
    """The remote side answered with an error code; ``response_code`` and the remark say which."""

    def __init__(self, response_code: int, remark: str):
        super().__init__(f"{_code_name(response_code)}: {remark}" if remark else _code_name(response_code))
        self.response_code = response_code
        self.remark = remark
        self.retriable = response_code in _RETRIABLE_RESPONSE_CODES


class ClientError(PocketMQError):
    """Misuse of the SDK (not started, no route for a topic, bad argument)."""


_RETRIABLE_RESPONSE_CODES = frozenset(
    {
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.NO_PERMISSION,
        ResponseCode.FLOW_CONTROL,
        ResponseCode.GO_AWAY,
    }
)


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"code {code}"
