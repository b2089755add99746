"""v2 <-> domain conversions of the pull consumer RPCs: PullMessage, UpdateOffset, GetOffset, QueryOffset.

PullMessage answers as a stream, as ReceiveMessage does: ``{status}``, one ``{message}`` per message, then
``{next_offset}`` (where the next pull of the queue starts). No official client calls these RPCs and the
Apache proxy does not serve them; the shapes follow the protocol's messages (docs/grpc.md, "Pull and offsets").
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.grpc_codec import ok_status, resource_name, status


@dataclass(frozen=True, slots=True)
class QueueRef:
    """The queue a pull or offset request names."""

    topic: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class PullRequest:
    group: str
    queue: QueueRef
    queue_offset: int
    batch_size: int  # 0: unset
    filter_type: str  # TAG | SQL
    filter_expression: str
    long_polling_ms: int | None  # None: not given


def _queue(mq) -> QueueRef:
    return QueueRef(resource_name(mq.topic), mq.id)


def decode_pull_request(request) -> PullRequest:
    fe = request.filter_expression
    return PullRequest(
        group=resource_name(request.group),
        queue=_queue(request.message_queue),
        queue_offset=request.offset,
        batch_size=request.batch_size,
        filter_type=pb.FilterType.Name(fe.type) if fe.type else "TAG",
        filter_expression=fe.expression or "*",
        long_polling_ms=request.long_polling_timeout.ToMilliseconds()
        if request.HasField("long_polling_timeout")
        else None,
    )


def pull_status(code: int = V2StatusCode.OK, message: str = ""):
    return spb.PullMessageResponse(status=status(code, message) if code != V2StatusCode.OK else ok_status())


def pull_message(message):
    return spb.PullMessageResponse(message=message)


def pull_next_offset(queue_offset: int):
    return spb.PullMessageResponse(next_offset=queue_offset)


def decode_update_offset_request(request) -> tuple[str, QueueRef, int]:
    return resource_name(request.group), _queue(request.message_queue), request.offset


def decode_get_offset_request(request) -> tuple[str, QueueRef]:
    return resource_name(request.group), _queue(request.message_queue)


def decode_query_offset_request(request) -> tuple[QueueRef, str, int | None]:
    """(queue, policy name BEGINNING|END|TIMESTAMP, timestamp ms or None) of a QueryOffsetRequest."""
    timestamp_ms = request.timestamp.ToMilliseconds() if request.HasField("timestamp") else None
    policy = request.query_offset_policy
    name = pb.QueryOffsetPolicy.Name(policy) if policy in pb.QueryOffsetPolicy.values() else str(policy)
    return _queue(request.message_queue), name, timestamp_ms


def offset_response(method: str, queue_offset: int):
    """An OK GetOffset / QueryOffset response."""
    return getattr(spb, f"{method}Response")(status=ok_status(), offset=queue_offset)


def update_offset_response():
    return spb.UpdateOffsetResponse(status=ok_status())
