"""Errors on the wire, both ways: the codes a front end answers an exception with, and the exception a client
raises for an error code it was answered with.

``response_code_of`` (remoting ``ResponseCode``) and ``v2_code_of`` (``apache.rocketmq.v2.Code``) look an
error's class up in the tables below, nearest class first, so a subclass answers with its parent's codes
unless it has its own. Two errors carry their code themselves: ``RemoteServerError`` (the code a remote side
answered with, which a front end relays as is) and ``V2StatusError`` (the gRPC front end's validation names
the status of each check, as RocketMQ's proxy does).
"""

from __future__ import annotations

from pocketmq.common.errors import (
    AccessDeniedError,
    BadRequestError,
    IllegalDeliveryTimeError,
    IllegalLiteTopicError,
    IllegalMessageError,
    IllegalQueueIdError,
    IllegalTopicError,
    InvalidRecallHandleError,
    InvalidReceiptHandleError,
    LiteSubscriptionQuotaExceededError,
    LiteTopicQuotaExceededError,
    MessageBodyEmptyError,
    MessageBodyTooLargeError,
    MessagePropertiesTooLargeError,
    MessageTypeConflictError,
    NoPermissionError,
    NotReplicatedError,
    PocketMQError,
    RecallTooLateError,
    ReplicationRefusedError,
    ServiceNotAvailableError,
    SubscriptionGroupNotExistError,
    SubscriptionParseError,
    SystemBusyError,
    TopicNotExistError,
)
from pocketmq.protocol.codes import ResponseCode, V2StatusCode


class RemoteServerError(PocketMQError):
    """The remote side answered with an error code; ``response_code`` and the remark say which."""

    def __init__(self, response_code: int, remark: str):
        super().__init__(f"{_code_name(response_code)}: {remark}" if remark else _code_name(response_code))
        self.response_code = response_code
        self.remark = remark
        self.retriable = response_code in _RETRIABLE_RESPONSE_CODES
        self.refresh_route = response_code in _REFRESH_ROUTE_RESPONSE_CODES


class V2StatusError(PocketMQError):
    """A gRPC request refused with the v2 status its front end's check names."""

    def __init__(self, v2_code: int, message: str):
        super().__init__(message)
        self.v2_code = v2_code


_RESPONSE_CODES: dict[type[PocketMQError], int] = {
    PocketMQError: ResponseCode.SYSTEM_ERROR,
    BadRequestError: ResponseCode.INVALID_PARAMETER,
    IllegalQueueIdError: ResponseCode.SYSTEM_ERROR,  # RocketMQ's answer to a queue id out of range
    SubscriptionParseError: ResponseCode.SUBSCRIPTION_PARSE_FAILED,
    IllegalMessageError: ResponseCode.MESSAGE_ILLEGAL,
    TopicNotExistError: ResponseCode.TOPIC_NOT_EXIST,
    SubscriptionGroupNotExistError: ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
    NoPermissionError: ResponseCode.NO_PERMISSION,
    AccessDeniedError: ResponseCode.NO_PERMISSION,  # ACL 2.0's answer (ACL 1.0 answered SYSTEM_ERROR)
    ServiceNotAvailableError: ResponseCode.SERVICE_NOT_AVAILABLE,
    SystemBusyError: ResponseCode.SYSTEM_BUSY,
    LiteTopicQuotaExceededError: ResponseCode.SYSTEM_BUSY,
    LiteSubscriptionQuotaExceededError: ResponseCode.SYSTEM_BUSY,
    ReplicationRefusedError: ResponseCode.ILLEGAL_OPERATION,
    InvalidRecallHandleError: ResponseCode.ILLEGAL_OPERATION,  # RocketMQ's RecallMessageProcessor answers
    RecallTooLateError: ResponseCode.ILLEGAL_OPERATION,
}

_V2_CODES: dict[type[PocketMQError], int] = {
    PocketMQError: V2StatusCode.INTERNAL_SERVER_ERROR,
    BadRequestError: V2StatusCode.BAD_REQUEST,
    IllegalTopicError: V2StatusCode.ILLEGAL_TOPIC,
    SubscriptionParseError: V2StatusCode.ILLEGAL_FILTER_EXPRESSION,
    IllegalDeliveryTimeError: V2StatusCode.ILLEGAL_DELIVERY_TIME,
    IllegalLiteTopicError: V2StatusCode.ILLEGAL_LITE_TOPIC,
    LiteTopicQuotaExceededError: V2StatusCode.LITE_TOPIC_QUOTA_EXCEEDED,
    LiteSubscriptionQuotaExceededError: V2StatusCode.LITE_SUBSCRIPTION_QUOTA_EXCEEDED,
    InvalidReceiptHandleError: V2StatusCode.INVALID_RECEIPT_HANDLE,
    MessageTypeConflictError: V2StatusCode.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
    NoPermissionError: V2StatusCode.FORBIDDEN,
    AccessDeniedError: V2StatusCode.UNAUTHORIZED,
    TopicNotExistError: V2StatusCode.TOPIC_NOT_FOUND,
    SubscriptionGroupNotExistError: V2StatusCode.CONSUMER_GROUP_NOT_FOUND,
    MessageBodyTooLargeError: V2StatusCode.MESSAGE_BODY_TOO_LARGE,
    MessageBodyEmptyError: V2StatusCode.MESSAGE_BODY_EMPTY,
    SystemBusyError: V2StatusCode.TOO_MANY_REQUESTS,
    MessagePropertiesTooLargeError: V2StatusCode.MESSAGE_PROPERTIES_TOO_LARGE,
    ServiceNotAvailableError: V2StatusCode.INTERNAL_SERVER_ERROR,
}


# What a gRPC front end answers when a broker it reached over remoting answered with an error (the proxy's
# translation); codes not listed are INTERNAL_SERVER_ERROR.
_V2_CODE_OF_RESPONSE: dict[int, int] = {
    ResponseCode.SYSTEM_BUSY: V2StatusCode.TOO_MANY_REQUESTS,
    ResponseCode.FLOW_CONTROL: V2StatusCode.TOO_MANY_REQUESTS,
    ResponseCode.FLUSH_DISK_TIMEOUT: V2StatusCode.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: V2StatusCode.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: V2StatusCode.HA_NOT_AVAILABLE,
    ResponseCode.MESSAGE_ILLEGAL: V2StatusCode.BAD_REQUEST,
    ResponseCode.INVALID_PARAMETER: V2StatusCode.BAD_REQUEST,
    ResponseCode.ILLEGAL_OPERATION: V2StatusCode.BAD_REQUEST,
    ResponseCode.NO_PERMISSION: V2StatusCode.FORBIDDEN,
    ResponseCode.TOPIC_NOT_EXIST: V2StatusCode.TOPIC_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: V2StatusCode.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: V2StatusCode.ILLEGAL_FILTER_EXPRESSION,
}


def response_code_of(error: PocketMQError) -> int:
    """The remoting response code to answer ``error`` with."""
    if isinstance(error, RemoteServerError):
        return error.response_code
    if isinstance(error, NotReplicatedError):  # the codes of the send statuses of the same cases
        return ResponseCode.FLUSH_SLAVE_TIMEOUT if error.slave_in_sync else ResponseCode.SLAVE_NOT_AVAILABLE
    return _nearest(_RESPONSE_CODES, error)


def v2_code_of(error: PocketMQError) -> int:
    """The v2 status code to answer ``error`` with."""
    if isinstance(error, V2StatusError):
        return error.v2_code
    if isinstance(error, RemoteServerError):
        return _V2_CODE_OF_RESPONSE.get(error.response_code, V2StatusCode.INTERNAL_SERVER_ERROR)
    if isinstance(error, NotReplicatedError):
        return V2StatusCode.SLAVE_PERSISTENCE_TIMEOUT if error.slave_in_sync else V2StatusCode.HA_NOT_AVAILABLE
    return _nearest(_V2_CODES, error)


def _nearest(table: dict[type[PocketMQError], int], error: PocketMQError) -> int:
    return next(table[cls] for cls in type(error).__mro__ if cls in table)


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
# The answers a client's route may be behind: the topic moved away from the broker, or lost its permission there.
_REFRESH_ROUTE_RESPONSE_CODES = frozenset({ResponseCode.TOPIC_NOT_EXIST, ResponseCode.NO_PERMISSION})


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"code {code}"
