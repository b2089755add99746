"""The typed request headers of every request code the broker's remoting port serves (``protocol.headers``).

One class per header shape, its fields with RocketMQ's wire names, Java types and the ranges PocketMQ accepts;
``BROKER_REQUEST_HEADERS`` maps each served code to its header (None: the code has no header fields), which
the handlers parse and the protocol fuzzer (tests) reads to build wrong values. docs/protocol.md
("Validation") lists the rules.
"""

from __future__ import annotations

from pocketmq.broker.pop.checkpoint import MAX_MESSAGES_PER_CK
from pocketmq.broker.pop.engine import MAX_INVISIBLE_MS
from pocketmq.cluster.escape import ESCAPE_DEADLINE_FIELD
from pocketmq.common.message import SYSFLAG_BORNHOST_V6, SYSFLAG_STOREHOST_V6
from pocketmq.errors import BadRequestError
from pocketmq.protocol.codes import (
    ACTING_MASTER_HANDOVER,
    ACTING_PROGRESS_APPLIED,
    ESCAPE_PUT_MESSAGE,
    GET_GROUP_GRAY_CLIENTS,
    HA_EPOCHS,
    HA_PULL_COMMIT_LOG,
    HA_SYNC_METADATA,
    QUERY_STAGE_OFFSETS,
    REGISTER_POP_STAGES,
    UNREGISTER_POP_STAGES,
    UPDATE_STAGE_OFFSETS,
    RequestCode,
)
from pocketmq.protocol.headers import (
    INT64_MAX,
    RequestHeader,
    boolean,
    choice,
    group_name,
    int32,
    int64,
    text,
    topic_name,
)
from pocketmq.protocol.limits import CLIENT_MAX_FRAME_BYTES

NAME_MAX_CHARS = 255  # broker names, client ids, addresses: RocketMQ's group name bound
PROPERTIES_MAX_CHARS = 32767  # a record's properties length is an int16
EXPRESSION_MAX_CHARS = 16 * 1024  # a tag expression ("a || b || ...")
MESSAGE_ID_MAX_CHARS = 128
# Host address flags of a record's sysFlag: the broker sets them from the connection, never a client.
HOST_V6_SYSFLAGS = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6
DEFAULT_PULL_MAX_NUMS = 32
QUERY_MESSAGE_MAX_NUMS = 64

# SendMessageRequestHeaderV2's one-letter names -> SendMessageRequestHeader's names.
SEND_V2_FIELD_NAMES = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "brokerName",
}


class SendMessageHeader(RequestHeader):
    """SEND_MESSAGE, SEND_BATCH_MESSAGE (either form), ESCAPE_PUT_MESSAGE."""

    producer_group: str | None = group_name("producerGroup", None)
    topic: str = topic_name()
    default_topic: str | None = text("defaultTopic", None, max_chars=NAME_MAX_CHARS)
    default_topic_queue_nums: int | None = int32("defaultTopicQueueNums", None, low=0)
    queue_id: int = int32("queueId", -1, low=-1)  # -1: the broker picks
    sys_flag: int = int32("sysFlag", 0, low=0)
    born_timestamp_ms: int = int64("bornTimestamp", 0, low=0)
    flag: int = int32("flag", 0)  # the user's own flag: any Java int
    properties: str = text("properties", "", max_chars=PROPERTIES_MAX_CHARS, control_ok=True)
    reconsume_times: int = int32("reconsumeTimes", 0, low=0)
    unit_mode: bool = boolean("unitMode")
    max_reconsume_times: int | None = int32("maxReconsumeTimes", None, low=-1)
    batch: bool = boolean("batch")
    broker_name: str | None = text("brokerName", None, max_chars=NAME_MAX_CHARS)

    def check(self) -> SendMessageHeader:
        """The rules across fields (none yet beyond sysFlag's bits); returns the header."""
        if self.sys_flag & HOST_V6_SYSFLAGS:
            raise BadRequestError(
                f"header field sysFlag={self.sys_flag} sets the host address flags "
                f"(0x{HOST_V6_SYSFLAGS:x}), which the broker sets"
            )
        return self


SendMessageHeaderV2 = SendMessageHeader.renamed({v: k for k, v in SEND_V2_FIELD_NAMES.items()}, "SendMessageHeaderV2")


class EscapePutMessageHeader(SendMessageHeaderV2):
    """ESCAPE_PUT_MESSAGE: SEND_MESSAGE_V2's fields and the sender's deadline (cluster/escape.py)."""

    deadline_ms: int | None = int64(ESCAPE_DEADLINE_FIELD, None, low=0)


def send_header(ext_fields: dict[str, str]) -> SendMessageHeader:
    """A send's header in whichever form it came: V2 (one-letter names) or V1."""
    v2 = "b" in ext_fields and "topic" not in ext_fields
    return (SendMessageHeaderV2 if v2 else SendMessageHeader).parse(ext_fields).check()


class QueueHeader(RequestHeader):
    """GET_MIN_OFFSET, GET_MAX_OFFSET, GET_EARLIEST_MSG_STORETIME."""

    topic: str = topic_name()
    queue_id: int = int32("queueId", low=0)


class SearchOffsetHeader(QueueHeader):
    timestamp_ms: int = int64("timestamp")


class GroupHeader(RequestHeader):
    """GET_CONSUMER_LIST_BY_GROUP, GET_GROUP_GRAY_CLIENTS."""

    consumer_group: str = group_name()


class GroupQueueHeader(GroupHeader):
    """QUERY_STAGE_OFFSETS, UPDATE_STAGE_OFFSETS."""

    topic: str = topic_name()
    queue_id: int = int32("queueId", low=0)


class QueryConsumerOffsetHeader(GroupQueueHeader):
    set_zero_if_not_found: bool = boolean("setZeroIfNotFound", True)


class UpdateConsumerOffsetHeader(GroupQueueHeader):
    commit_offset: int = int64("commitOffset")  # negative: nothing consumed yet (ignored)


class PullMessageHeader(GroupQueueHeader):
    queue_offset: int = int64("queueOffset", low=0)
    max_msg_nums: int = int32("maxMsgNums", DEFAULT_PULL_MAX_NUMS, low=1)  # served up to PULL_MAX_COUNT
    sys_flag: int = int32("sysFlag", 0, low=0)
    commit_offset: int = int64("commitOffset", -1)
    suspend_timeout_ms: int = int64("suspendTimeoutMillis", 0, low=0)
    subscription: str = text("subscription", "*", max_chars=EXPRESSION_MAX_CHARS)
    sub_version: int = int64("subVersion", 0)
    expression_type: str = choice("expressionType", ("TAG", "SQL92"), "TAG")


class UnregisterClientHeader(RequestHeader):
    client_id: str = text("clientID", max_chars=NAME_MAX_CHARS)
    producer_group: str | None = group_name("producerGroup", None)
    consumer_group: str | None = group_name("consumerGroup", None)


class ViewMessageHeader(RequestHeader):
    """``offset`` (commit log offset) or PocketMQ's ``msgId``: the handler needs one of them."""

    offset: int | None = int64("offset", None, low=0)
    msg_id: str | None = text("msgId", None, max_chars=MESSAGE_ID_MAX_CHARS)


class QueryMessageHeader(RequestHeader):
    topic: str = topic_name()
    key: str = text("key", max_chars=MESSAGE_ID_MAX_CHARS * 8)
    max_num: int = int32("maxNum", QUERY_MESSAGE_MAX_NUMS, low=1)  # served up to QUERY_MESSAGE_MAX_NUMS
    begin_timestamp_ms: int = int64("beginTimestamp", 0)
    end_timestamp_ms: int = int64("endTimestamp", INT64_MAX)
    unique_key_query: bool = boolean("_UNIQUE_KEY_QUERY")


class TopicHeader(RequestHeader):
    """DELETE_TOPIC_IN_BROKER."""

    topic: str = topic_name()


class DeleteGroupHeader(RequestHeader):
    group: str = group_name("groupName")
    clean_offset: bool = boolean("cleanOffset")


class ConsumeStatsHeader(GroupHeader):
    topic: str | None = topic_name("topic", None)


class PopMessageHeader(GroupHeader):
    topic: str = topic_name()
    queue_id: int = int32("queueId", -1, low=-1)  # -1: every queue
    max_msg_nums: int = int32("maxMsgNums", MAX_MESSAGES_PER_CK, low=1, high=MAX_MESSAGES_PER_CK)
    invisible_time_ms: int = int64("invisibleTime", low=0, high=MAX_INVISIBLE_MS)
    poll_time_ms: int = int64("pollTime", 0, low=0)
    born_time_ms: int = int64("bornTime", 0, low=0)
    init_mode: int = int32("initMode", 0, low=0, high=1)  # 0 MIN, 1 MAX
    exp_type: str = choice("expType", ("TAG", "SQL92"), "TAG")
    exp: str = text("exp", "*", max_chars=EXPRESSION_MAX_CHARS)
    order: bool = boolean("order")
    attempt_id: str | None = text("attemptId", None, max_chars=MESSAGE_ID_MAX_CHARS)


class AckMessageHeader(GroupHeader):
    topic: str = topic_name()
    queue_id: int = int32("queueId", low=0)
    extra_info: str = text("extraInfo", max_chars=NAME_MAX_CHARS * 2)
    offset: int | None = int64("offset", None, low=0)


class ChangeInvisibleTimeHeader(AckMessageHeader):
    invisible_time_ms: int = int64("invisibleTime", low=0, high=MAX_INVISIBLE_MS)


class SendMessageBackHeader(RequestHeader):
    group: str = group_name("group")
    offset: int = int64("offset", low=0)
    delay_level: int = int32("delayLevel", 0)  # 0: the broker decides, < 0: the DLQ
    origin_msg_id: str | None = text("originMsgId", None, max_chars=MESSAGE_ID_MAX_CHARS)
    origin_topic: str | None = topic_name("originTopic", None)
    max_reconsume_times: int | None = int32("maxReconsumeTimes", None, low=-1)
    unit_mode: bool = boolean("unitMode")


class GroupTopicHeader(GroupHeader):
    """UNREGISTER_POP_STAGES."""

    topic: str = topic_name()


class RegisterPopStagesHeader(GroupTopicHeader):
    restart_stages: bool = boolean("restartStages")


class BrokerNameHeader(RequestHeader):
    """HA_SYNC_METADATA, HA_EPOCHS, ACTING_MASTER_HANDOVER."""

    broker_name: str = text("brokerName", max_chars=NAME_MAX_CHARS)
    slave_addr: str | None = text("slaveAddr", None, max_chars=NAME_MAX_CHARS)
    master_addr: str | None = text("masterAddr", None, max_chars=NAME_MAX_CHARS)


class HaPullHeader(BrokerNameHeader):
    broker_id: int = int64("brokerId", 0, low=0)
    phys_offset: int = int64("physOffset", low=0)
    max_bytes: int = int32("maxBytes", low=1, high=CLIENT_MAX_FRAME_BYTES)  # a reply must fit the slave's frames
    suspend_ms: int = int64("suspendMillis", 0, low=0)
    last_record_phys_offset: int | None = int64("lastRecordPhysOffset", None, low=0)
    last_record_crc32c: int | None = int64("lastRecordCrc32c", None, low=0, high=(1 << 32) - 1)
    applied_metadata_version: str | None = text("appliedMetadataVersion", None, max_chars=NAME_MAX_CHARS)


class ActingProgressAppliedHeader(BrokerNameHeader):
    version: int = int64("version", low=0)


# Every code the broker's remoting port serves -> its header (None: no header fields, a body or nothing).
BROKER_REQUEST_HEADERS: dict[int, type[RequestHeader] | None] = {
    RequestCode.SEND_MESSAGE: SendMessageHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageHeaderV2,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageHeaderV2,
    ESCAPE_PUT_MESSAGE: EscapePutMessageHeader,
    RequestCode.PULL_MESSAGE: PullMessageHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetHeader,
    RequestCode.GET_MIN_OFFSET: QueueHeader,
    RequestCode.GET_MAX_OFFSET: QueueHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: QueueHeader,
    RequestCode.HEART_BEAT: None,  # JSON body (remoting_broker.heartbeat_from_json)
    RequestCode.UNREGISTER_CLIENT: UnregisterClientHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GroupHeader,
    RequestCode.VIEW_MESSAGE_BY_ID: ViewMessageHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageHeader,
    RequestCode.UPDATE_AND_CREATE_TOPIC: None,  # its header is a TopicConfig (remoting_admin.topic_config_from_header)
    RequestCode.GET_ALL_TOPIC_CONFIG: None,
    RequestCode.DELETE_TOPIC_IN_BROKER: TopicHeader,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: None,  # JSON body (broker/groups.py)
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: None,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: DeleteGroupHeader,
    RequestCode.GET_CONSUME_STATS: ConsumeStatsHeader,
    RequestCode.GET_BROKER_CONFIG: None,
    RequestCode.UPDATE_BROKER_CONFIG: None,  # key=value body
    RequestCode.GET_BROKER_RUNTIME_INFO: None,
    RequestCode.POP_MESSAGE: PopMessageHeader,
    RequestCode.ACK_MESSAGE: AckMessageHeader,
    RequestCode.BATCH_ACK_MESSAGE: None,  # JSON body
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: ChangeInvisibleTimeHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: SendMessageBackHeader,
    RequestCode.LOCK_BATCH_MQ: None,  # JSON body
    RequestCode.UNLOCK_BATCH_MQ: None,  # JSON body
    HA_PULL_COMMIT_LOG: HaPullHeader,
    HA_SYNC_METADATA: BrokerNameHeader,
    HA_EPOCHS: BrokerNameHeader,
    ACTING_MASTER_HANDOVER: BrokerNameHeader,
    ACTING_PROGRESS_APPLIED: ActingProgressAppliedHeader,
    QUERY_STAGE_OFFSETS: GroupQueueHeader,
    UPDATE_STAGE_OFFSETS: GroupQueueHeader,
    REGISTER_POP_STAGES: RegisterPopStagesHeader,
    UNREGISTER_POP_STAGES: GroupTopicHeader,
    GET_GROUP_GRAY_CLIENTS: GroupHeader,
}
