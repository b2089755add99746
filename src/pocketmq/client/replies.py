"""Reading a broker's or name server's reply the same way in every SDK client: success or a typed error."""

from __future__ import annotations

import json

from pocketmq.common.errors import IllegalTopicError
from pocketmq.common.topic import topic_name_problem
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.protocol.replies import expect_success


def check_topic(topic: str) -> None:
    """Refuse an illegal topic name before it costs a round trip."""
    problem = topic_name_problem(topic)
    if problem:
        raise IllegalTopicError(problem)


def offset_of(response: RemotingCommand) -> int:
    """The ``offset`` field of a successful offset reply (min, max, by timestamp, consumer offset)."""
    expect_success(response)
    try:
        return int(response.ext_fields["offset"])
    except (KeyError, ValueError):
        raise RemoteServerError(ResponseCode.SYSTEM_ERROR, f"reply lacks an offset: {response.ext_fields}") from None


def json_body(response: RemotingCommand) -> dict:
    """The reply's JSON object body ({} when there is none)."""
    if not response.body:
        return {}
    try:
        obj = json.loads(response.body)
    except ValueError as exc:
        raise RemoteServerError(ResponseCode.SYSTEM_ERROR, f"reply body is not JSON: {exc}") from None
    return obj if isinstance(obj, dict) else {}
