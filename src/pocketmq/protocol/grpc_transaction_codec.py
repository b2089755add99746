"""The v2 transaction messages (``apache.rocketmq.v2``): EndTransaction and the recovery command a broker pushes
on a producer's Telemetry stream (../shared/reference/transactions.md §10)."""

from __future__ import annotations

from dataclasses import dataclass

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.protocol.grpc_codec import ok_status, status


@dataclass(frozen=True, slots=True)
class EndTransaction:
    topic: str
    message_id: str
    transaction_id: str
    resolution: str  # TRANSACTION_RESOLUTION_UNSPECIFIED, COMMIT, ROLLBACK (or the digits of an unknown value)
    from_check: bool  # source SOURCE_SERVER_CHECK


def decode_end_transaction(request) -> EndTransaction:
    resolution = request.resolution
    return EndTransaction(
        topic=request.topic.name,
        message_id=request.message_id,
        transaction_id=request.transaction_id,
        resolution=pb.TransactionResolution.Name(resolution)
        if resolution in pb.TransactionResolution.values()
        else str(resolution),
        from_check=request.source == pb.SOURCE_SERVER_CHECK,
    )


def end_transaction_response(code: int, message: str = ""):
    return spb.EndTransactionResponse(status=status(code, message))


def recover_orphaned_transaction(message, transaction_id: str):
    """The TelemetryCommand asking a producer to resolve ``message`` (a ``pb.Message``, built by
    ``grpc_codec.encode_delivered_message``: topic, message id and body digest, which the clients need)."""
    command = spb.TelemetryCommand(status=ok_status())
    command.recover_orphaned_transaction_command.message.CopyFrom(message)
    command.recover_orphaned_transaction_command.transaction_id = transaction_id
    return command
