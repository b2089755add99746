"""v2 <-> domain conversions of the consumer RPCs: ReceiveMessage, AckMessage, ChangeInvisibleDuration,
QueryAssignment and ForwardMessageToDeadLetterQueue (requests decoded into plain values, responses built from
domain values), beside ``grpc_codec`` which holds the shared parts (status, delivered message, endpoints).

ReceiveMessage answers as a stream (reference §4): ``{status OK}``, one ``{message}`` per message, then
``{delivery_timestamp}``; nothing found is ``{status MESSAGE_NOT_FOUND}`` + timestamp; an error is one status.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.grpc_codec import make_endpoints, ok_status, status


@dataclass(frozen=True, slots=True)
class ReceiveRequest:
    group: str
    topic: str
    queue_id: int  # -1: any queue
    broker_name: str  # the broker of the queue the client named ("" when none)
    filter_type: str  # TAG | SQL
    filter_expression: str
    batch_size: int
    invisible_ms: int | None  # None: not given (push consumers with auto renew)
    auto_renew: bool
    long_polling_ms: int | None


@dataclass(frozen=True, slots=True)
class AckEntry:
    message_id: str
    receipt_handle: str


def _duration_ms(d) -> int:
    return d.seconds * 1000 + d.nanos // 1_000_000


def decode_receive_request(request) -> ReceiveRequest:
    mq = request.message_queue
    fe = request.filter_expression
    return ReceiveRequest(
        group=request.group.name,
        topic=mq.topic.name,
        queue_id=mq.id if request.HasField("message_queue") else -1,
        broker_name=mq.broker.name,
        filter_type=pb.FilterType.Name(fe.type) if fe.type else "TAG",
        filter_expression=fe.expression or "*",
        batch_size=request.batch_size,
        invisible_ms=_duration_ms(request.invisible_duration) if request.HasField("invisible_duration") else None,
        auto_renew=request.auto_renew,
        long_polling_ms=_duration_ms(request.long_polling_timeout)
        if request.HasField("long_polling_timeout")
        else None,
    )


def receive_status(code: int = V2StatusCode.OK, message: str = "OK"):
    return spb.ReceiveMessageResponse(status=status(code, message) if code != V2StatusCode.OK else ok_status())


def receive_message(message):
    return spb.ReceiveMessageResponse(message=message)


def receive_delivery_timestamp(now_ms: int):
    response = spb.ReceiveMessageResponse()
    response.delivery_timestamp.FromMilliseconds(now_ms)
    return response


def decode_ack_request(request) -> tuple[str, str, list[AckEntry]]:
    return (request.group.name, request.topic.name, [AckEntry(e.message_id, e.receipt_handle) for e in request.entries])


def ack_response(results: list[tuple[AckEntry, int, str]]):
    """One entry per acked message (code, message); top-level OK, or MULTIPLE_RESULTS when they differ."""
    response = spb.AckMessageResponse()
    codes = {code for _, code, _ in results}
    for entry, code, message in results:
        response.entries.add(
            message_id=entry.message_id,
            receipt_handle=entry.receipt_handle,
            status=status(code, message) if code != V2StatusCode.OK else ok_status(),
        )
    if len(codes) > 1:
        response.status.CopyFrom(status(V2StatusCode.MULTIPLE_RESULTS, "entries have different results"))
    else:
        code, message = (results[0][1], results[0][2]) if results else (V2StatusCode.OK, "OK")
        response.status.CopyFrom(status(code, message) if code != V2StatusCode.OK else ok_status())
    return response


def ack_error_response(code: int, message: str):
    return spb.AckMessageResponse(status=status(code, message))


def decode_change_invisible_request(request) -> tuple[str, str, str, int, str]:
    """(group, topic, receipt handle, invisible duration ms, message id)."""
    return (
        request.group.name,
        request.topic.name,
        request.receipt_handle,
        _duration_ms(request.invisible_duration),
        request.message_id,
    )


def change_invisible_response(code: int, message: str, receipt_handle: str):
    """Python overwrites its handle with the reply's before it checks the status: always a usable handle."""
    return spb.ChangeInvisibleDurationResponse(
        status=status(code, message) if code != V2StatusCode.OK else ok_status(), receipt_handle=receipt_handle
    )


def decode_assignment_request(request) -> tuple[str, str, list[tuple[str, int]]]:
    return (request.topic.name, request.group.name, [(a.host, a.port) for a in request.endpoints.addresses])


def assignment_response(topic: str, broker_name: str, queue_ids: list[int], endpoints: list[tuple[str, int]]):
    """Assignments of ``topic`` on one broker: ``[-1]`` means any queue (the proxy's answer for non-FIFO)."""
    return assignments_response(topic, {broker_name: queue_ids}, endpoints)


def assignments_response(topic: str, queue_ids: dict[str, list[int]], endpoints: list[tuple[str, int]]):
    """Assignments of ``topic`` on several brokers (broker name -> its queue ids, ``[-1]``: any queue)."""
    response = spb.QueryAssignmentResponse(status=ok_status())
    for broker_name, ids in queue_ids.items():
        for queue_id in ids:
            assignment = response.assignments.add()
            mq = assignment.message_queue
            mq.topic.name = topic
            mq.id = queue_id
            mq.permission = pb.READ_WRITE
            mq.broker.name = broker_name
            mq.broker.id = 0
            mq.broker.endpoints.CopyFrom(make_endpoints(endpoints))
    return response


def assignment_error_response(code: int, message: str):
    return spb.QueryAssignmentResponse(status=status(code, message))


def decode_forward_request(request) -> tuple[str, str, str, str]:
    """(group, topic, receipt handle, message id)."""
    return request.group.name, request.topic.name, request.receipt_handle, request.message_id


def forward_response(code: int = V2StatusCode.OK, message: str = "OK"):
    return spb.ForwardMessageToDeadLetterQueueResponse(
        status=status(code, message) if code != V2StatusCode.OK else ok_status()
    )
