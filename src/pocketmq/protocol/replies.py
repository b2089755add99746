"""A remoting reply's outcome, read one way by every caller (SDK, broker, replication): SUCCESS, or the
``RemoteServerError`` carrying the code and remark the remote side answered with."""

from __future__ import annotations

from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError


def reply_error(reply: RemotingCommand) -> RemoteServerError:
    """The error a refusing reply reports (for callers that accept more codes than SUCCESS)."""
    return RemoteServerError(reply.code, reply.remark or "")


def expect_success(reply: RemotingCommand) -> RemotingCommand:
    """``reply`` when it is SUCCESS; raises its ``reply_error`` otherwise."""
    if reply.code != ResponseCode.SUCCESS:
        raise reply_error(reply)
    return reply
