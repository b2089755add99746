"""What the simulated nodes say to each other. Remote reads of messages are real ``RemotingCommand``
PULL_MESSAGE requests and replies (what ``RemoteMessageReader`` sends and classifies); the rest are small
records standing in for the remoting requests of the real processes."""

from __future__ import annotations

from dataclasses import dataclass, field

from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.common.message import MessageExt
from pocketmq.protocol.route import BrokerIdentity
from pocketmq.store.commit_log import RecordMark


@dataclass(frozen=True, slots=True)
class Register:  # REGISTER_BROKER, every heartbeat
    identity: BrokerIdentity


@dataclass(frozen=True, slots=True)
class GetClusterInfo:  # GET_BROKER_CLUSTER_INFO
    pass


@dataclass(frozen=True, slots=True)
class Send:  # SEND_MESSAGE to a master
    message: MessageExt


@dataclass(frozen=True, slots=True)
class SendReply:
    status: str  # SEND_OK, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE, SERVICE_NOT_AVAILABLE
    queue_offset: int = -1


@dataclass(frozen=True, slots=True)
class HaPull:  # HA_PULL_COMMIT_LOG: everything before phys_offset is on the slave (the ack)
    link: tuple[str, int]  # (slave address, slave incarnation): one per connection
    phys_offset: int
    last_record: RecordMark | None = None  # lastRecordPhysOffset / lastRecordCrc32c


@dataclass(frozen=True, slots=True)
class HaPullReply:
    records: tuple[MessageExt, ...] = ()
    refused: str = ""  # why the master will not serve this slave (it diverged)
    pop_offsets: dict = field(default_factory=dict)  # the metadata sync, carried along


@dataclass(frozen=True, slots=True)
class Pop:
    topic: str
    queue_id: int
    max_count: int
    invisible_ms: int


@dataclass(frozen=True, slots=True)
class PopReply:
    messages: tuple[MessageExt, ...] = ()
    checkpoint: PopCheckpoint | None = None
    ck_store_group: str = ""  # the group whose revive queue holds the CK (another one when escaped)
    error: str = ""


@dataclass(frozen=True, slots=True)
class Ack:
    ack: AckRecord


@dataclass(frozen=True, slots=True)
class AckReply:
    ok: bool
    error: str = ""


@dataclass(frozen=True, slots=True)
class Escape:  # a slave acting master writing through another group's master (RIP-32's escape bridge)
    messages: tuple[MessageExt, ...]


@dataclass(frozen=True, slots=True)
class EscapeReply:
    ok: bool
