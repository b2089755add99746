"""The typed request headers of the remoting requests brokers serve, declared once for senders and servers.

One class per header shape (``protocol.headers``), its fields with RocketMQ's wire names, Java types and the
ranges PocketMQ accepts. The SDK, the CLI, the Spark connector and the brokers' own requests to each other build
requests with these classes (``Header.ext_fields(...)``); the broker parses them with the same classes
(``server.broker_headers`` maps each served code to its header and adds the broker's own bounds). Field order is
the order senders put the fields on the wire. docs/protocol.md ("Validation") lists the rules.
"""

from __future__ import annotations

from pocketmq.common.errors import BadRequestError
from pocketmq.common.message import SYSFLAG_BORNHOST_V6, SYSFLAG_STOREHOST_V6
from pocketmq.protocol.headers import (
    INT64_MAX,
    TEXT_MAX_CHARS,
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
# ESCAPE_PUT_MESSAGE's own field (cluster/escape.py): when the sender stops waiting (its wall clock, ms).
ESCAPE_DEADLINE_FIELD = "escapeDeadlineMs"

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


class PullSysFlag:
    """The bits of PULL_MESSAGE's ``sysFlag`` (RocketMQ ``PullSysFlag``). RocketMQ's class filter (0x8) and lite
    pull (0x10) bits are neither sent nor read by PocketMQ."""

    COMMIT_OFFSET = 0x1  # store the request's commitOffset as the group's offset of the queue
    SUSPEND = 0x2  # the broker may hold the request up to suspendTimeoutMillis for a message (long polling)
    SUBSCRIPTION = 0x4  # filter by the request's subscription, not by the one of the group's heartbeat

    @staticmethod
    def of(*, commit_offset: bool = False, suspend: bool = False, subscription: bool = False) -> int:
        """The sysFlag of a pull (RocketMQ ``PullSysFlag.buildSysFlag`` without the bits PocketMQ never sets)."""
        return (
            (PullSysFlag.COMMIT_OFFSET if commit_offset else 0)
            | (PullSysFlag.SUSPEND if suspend else 0)
            | (PullSysFlag.SUBSCRIPTION if subscription else 0)
        )


class SendMessageRequestHeader(RequestHeader):
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

    def check(self) -> SendMessageRequestHeader:
        """The rules across fields (none yet beyond sysFlag's bits); returns the header."""
        if self.sys_flag & HOST_V6_SYSFLAGS:
            raise BadRequestError(
                f"header field sysFlag={self.sys_flag} sets the host address flags "
                f"(0x{HOST_V6_SYSFLAGS:x}), which the broker sets"
            )
        return self


class SendMessageRequestHeaderV2(SendMessageRequestHeader, wire_names={v: k for k, v in SEND_V2_FIELD_NAMES.items()}):
    """SEND_MESSAGE_V2, SEND_BATCH_MESSAGE: SendMessageRequestHeader's fields under their one-letter names."""


class EscapePutMessageRequestHeader(SendMessageRequestHeaderV2):
    """ESCAPE_PUT_MESSAGE: SEND_MESSAGE_V2's fields and the sender's deadline (cluster/escape.py)."""

    deadline_ms: int | None = int64(ESCAPE_DEADLINE_FIELD, None, low=0)


def send_header(ext_fields: dict[str, str]) -> SendMessageRequestHeader:
    """A send's header in whichever form it came: V2 (one-letter names) or V1."""
    v2 = "b" in ext_fields and "topic" not in ext_fields
    return (SendMessageRequestHeaderV2 if v2 else SendMessageRequestHeader).parse(ext_fields).check()


class QueueRequestHeader(RequestHeader):
    """GET_MIN_OFFSET, GET_MAX_OFFSET, GET_EARLIEST_MSG_STORETIME."""

    topic: str = topic_name()
    queue_id: int = int32("queueId", low=0)


class SearchOffsetRequestHeader(QueueRequestHeader):
    timestamp_ms: int = int64("timestamp")


class GroupRequestHeader(RequestHeader):
    """GET_CONSUMER_LIST_BY_GROUP, GET_GROUP_GRAY_CLIENTS."""

    consumer_group: str = group_name()


class GroupQueueRequestHeader(GroupRequestHeader):
    """QUERY_STAGE_OFFSETS, UPDATE_STAGE_OFFSETS."""

    topic: str = topic_name()
    queue_id: int = int32("queueId", low=0)


class QueryConsumerOffsetRequestHeader(GroupQueueRequestHeader):
    set_zero_if_not_found: bool = boolean("setZeroIfNotFound", True)


class UpdateConsumerOffsetRequestHeader(GroupQueueRequestHeader):
    commit_offset: int = int64("commitOffset")  # negative: nothing consumed yet (ignored)


class PullMessageRequestHeader(GroupQueueRequestHeader):
    queue_offset: int = int64("queueOffset", low=0)
    max_msg_nums: int = int32("maxMsgNums", DEFAULT_PULL_MAX_NUMS, low=1)  # served up to PULL_MAX_COUNT
    sys_flag: int = int32("sysFlag", 0, low=0)  # PullSysFlag bits
    commit_offset: int = int64("commitOffset", -1)
    suspend_timeout_ms: int = int64("suspendTimeoutMillis", 0, low=0)
    subscription: str = text("subscription", "*", max_chars=EXPRESSION_MAX_CHARS)
    sub_version: int = int64("subVersion", 0)
    expression_type: str = choice("expressionType", ("TAG", "SQL92"), "TAG")


class UnregisterClientRequestHeader(RequestHeader):
    client_id: str = text("clientID", max_chars=NAME_MAX_CHARS)
    producer_group: str | None = group_name("producerGroup", None)
    consumer_group: str | None = group_name("consumerGroup", None)


class ViewMessageRequestHeader(RequestHeader):
    """``offset`` (commit log offset) or PocketMQ's ``msgId``: the handler needs one of them."""

    offset: int | None = int64("offset", None, low=0)
    msg_id: str | None = text("msgId", None, max_chars=MESSAGE_ID_MAX_CHARS)


class QueryMessageRequestHeader(RequestHeader):
    topic: str = topic_name()
    key: str = text("key", max_chars=MESSAGE_ID_MAX_CHARS * 8)
    max_num: int = int32("maxNum", QUERY_MESSAGE_MAX_NUMS, low=1)  # served up to QUERY_MESSAGE_MAX_NUMS
    begin_timestamp_ms: int = int64("beginTimestamp", 0)
    end_timestamp_ms: int = int64("endTimestamp", INT64_MAX)
    unique_key_query: bool = boolean("_UNIQUE_KEY_QUERY")


class TopicRequestHeader(RequestHeader):
    """DELETE_TOPIC_IN_BROKER."""

    topic: str = topic_name()


class DeleteSubscriptionGroupRequestHeader(RequestHeader):
    group: str = group_name("groupName")
    clean_offset: bool = boolean("cleanOffset")


class GetConsumeStatsRequestHeader(GroupRequestHeader):
    topic: str | None = topic_name("topic", None)


class PopMessageRequestHeader(GroupRequestHeader):
    """POP_MESSAGE; the broker bounds ``maxMsgNums`` and ``invisibleTime`` further (server.broker_headers)."""

    topic: str = topic_name()
    queue_id: int = int32("queueId", -1, low=-1)  # -1: every queue
    max_msg_nums: int = int32("maxMsgNums", low=1)
    invisible_time_ms: int = int64("invisibleTime", low=0)
    poll_time_ms: int = int64("pollTime", 0, low=0)
    born_time_ms: int = int64("bornTime", 0, low=0)
    init_mode: int = int32("initMode", 0, low=0, high=1)  # 0 MIN, 1 MAX
    exp_type: str = choice("expType", ("TAG", "SQL92"), "TAG")
    exp: str = text("exp", "*", max_chars=EXPRESSION_MAX_CHARS)
    order: bool = boolean("order")
    attempt_id: str | None = text("attemptId", None, max_chars=MESSAGE_ID_MAX_CHARS)


class AckMessageRequestHeader(GroupRequestHeader):
    topic: str = topic_name()
    queue_id: int = int32("queueId", low=0)
    extra_info: str = text("extraInfo", max_chars=NAME_MAX_CHARS * 2)
    offset: int | None = int64("offset", None, low=0)


class ChangeInvisibleTimeRequestHeader(AckMessageRequestHeader):
    """CHANGE_MESSAGE_INVISIBLETIME; the broker bounds ``invisibleTime`` further (server.broker_headers)."""

    invisible_time_ms: int = int64("invisibleTime", low=0)


class ConsumerSendMsgBackRequestHeader(RequestHeader):
    offset: int = int64("offset", low=0)
    group: str = group_name("group")
    delay_level: int = int32("delayLevel", 0)  # 0: the broker decides, < 0: the DLQ
    origin_msg_id: str | None = text("originMsgId", None, max_chars=MESSAGE_ID_MAX_CHARS)
    origin_topic: str | None = topic_name("originTopic", None)
    unit_mode: bool = boolean("unitMode")
    max_reconsume_times: int | None = int32("maxReconsumeTimes", None, low=-1)


class GroupTopicRequestHeader(GroupRequestHeader):
    """UNREGISTER_POP_STAGES."""

    topic: str = topic_name()


class RegisterPopStagesRequestHeader(GroupTopicRequestHeader):
    restart_stages: bool = boolean("restartStages")


class BrokerNameRequestHeader(RequestHeader):
    """HA_SYNC_METADATA, HA_EPOCHS, ACTING_MASTER_HANDOVER."""

    broker_name: str = text("brokerName", max_chars=NAME_MAX_CHARS)
    slave_addr: str | None = text("slaveAddr", None, max_chars=NAME_MAX_CHARS)
    master_addr: str | None = text("masterAddr", None, max_chars=NAME_MAX_CHARS)
    # HA_EPOCHS and HA_PULL_COMMIT_LOG of a slave under a controller: the newest epoch it knows (cluster.epoch_fence)
    controller_epoch: int | None = int64("controllerEpoch", None, low=0)


class HaPullRequestHeader(BrokerNameRequestHeader, first=("broker_name", "broker_id", "slave_addr")):
    """HA_PULL_COMMIT_LOG, in the order slaves have always sent it: the broker id before the slave's address."""

    broker_id: int = int64("brokerId", 0, low=0)
    phys_offset: int = int64("physOffset", low=0)
    max_bytes: int = int32("maxBytes", low=1, high=CLIENT_MAX_FRAME_BYTES)  # a reply must fit the slave's frames
    suspend_ms: int = int64("suspendMillis", 0, low=0)
    last_record_phys_offset: int | None = int64("lastRecordPhysOffset", None, low=0)
    last_record_crc32c: int | None = int64("lastRecordCrc32c", None, low=0, high=(1 << 32) - 1)
    applied_metadata_version: str | None = text("appliedMetadataVersion", None, max_chars=NAME_MAX_CHARS)


class ActingProgressAppliedRequestHeader(BrokerNameRequestHeader):
    version: int = int64("version", low=0)


class ActingProgressOfferRequestHeader(BrokerNameRequestHeader):
    """ACTING_PROGRESS_OFFER: the slave that offers (its id and address, which the master checks in the name server
    before it calls that address)."""

    broker_id: int = int64("brokerId", low=1)
    slave_addr: str = text("slaveAddr", max_chars=NAME_MAX_CHARS)


class EndTransactionRequestHeader(RequestHeader):
    """END_TRANSACTION (37), producer -> broker, oneway: RocketMQ's ``EndTransactionRequestHeader``.
    ``commitOrRollback`` is 0 (unknown), 8 (commit) or 12 (rollback); anything else fails as RocketMQ's
    ``checkFields`` does."""

    producer_group: str = group_name("producerGroup")
    tran_state_table_offset: int = int64("tranStateTableOffset", low=0)
    commit_log_offset: int = int64("commitLogOffset", low=0)
    commit_or_rollback: str = choice("commitOrRollback", ("0", "8", "12"))
    from_transaction_check: bool = boolean("fromTransactionCheck")
    msg_id: str = text("msgId", max_chars=MESSAGE_ID_MAX_CHARS)
    transaction_id: str | None = text("transactionId", None, max_chars=MESSAGE_ID_MAX_CHARS)
    topic: str | None = text("topic", None, max_chars=NAME_MAX_CHARS)
    broker_name: str | None = text("bname", None, max_chars=NAME_MAX_CHARS)


class RecallMessageRequestHeader(RequestHeader):
    """RECALL_MESSAGE (370), producer -> broker: RocketMQ 5's ``RecallMessageRequestHeader`` (``bname``, the
    broker the handle names, as its ``RpcRequestHeader`` spells it)."""

    producer_group: str | None = text("producerGroup", None, max_chars=NAME_MAX_CHARS)
    topic: str = topic_name("topic")
    recall_handle: str = text("recallHandle", max_chars=TEXT_MAX_CHARS)
    broker_name: str | None = text("bname", None, max_chars=NAME_MAX_CHARS)


class CheckTransactionStateRequestHeader(RequestHeader):
    """CHECK_TRANSACTION_STATE (39), broker -> producer, oneway: the half record's offsets and ids (the body is the
    message)."""

    tran_state_table_offset: int = int64("tranStateTableOffset", low=0)
    commit_log_offset: int = int64("commitLogOffset", low=0)
    offset_msg_id: str | None = text("offsetMsgId", None, max_chars=MESSAGE_ID_MAX_CHARS)
    msg_id: str | None = text("msgId", None, max_chars=MESSAGE_ID_MAX_CHARS)
    transaction_id: str | None = text("transactionId", None, max_chars=MESSAGE_ID_MAX_CHARS)
    topic: str | None = text("topic", None, max_chars=NAME_MAX_CHARS)
    broker_name: str | None = text("bname", None, max_chars=NAME_MAX_CHARS)


class ResumeCheckHalfMessageRequestHeader(RequestHeader):
    """RESUME_CHECK_HALF_MESSAGE (323): ``msgId`` is the offset message id of a record put aside in
    ``TRANS_CHECK_MAX_TIME_TOPIC``."""

    topic: str | None = text("topic", None, max_chars=NAME_MAX_CHARS)
    msg_id: str = text("msgId", max_chars=MESSAGE_ID_MAX_CHARS)


class GetTransactionStatusRequestHeader(RequestHeader):
    """GET_TRANSACTION_STATUS (PocketMQ's 30500): how many put-aside messages to list at most."""

    max_discarded: int = int32("maxDiscarded", 1000, low=0, high=100_000)


class UserRequestHeader(RequestHeader):
    """AUTH_CREATE_USER, AUTH_UPDATE_USER, AUTH_DELETE_USER, AUTH_GET_USER (3001-3004); blank is refused later."""

    username: str = text("username", "", max_chars=NAME_MAX_CHARS)


class ListUsersRequestHeader(RequestHeader):
    """AUTH_LIST_USER (3005): names containing ``filter``; ``withSecret`` (PocketMQ's): the secrets too, for a
    Super caller (the gRPC proxy checks signatures with them)."""

    name_filter: str = text("filter", "", max_chars=NAME_MAX_CHARS)
    with_secret: bool = boolean("withSecret")


class AclRequestHeader(RequestHeader):
    """AUTH_CREATE_ACL, AUTH_UPDATE_ACL, AUTH_GET_ACL (3006, 3007, 3009): ``User:<name>``."""

    subject: str = text("subject", "", max_chars=NAME_MAX_CHARS)


class DeleteAclRequestHeader(AclRequestHeader):
    """AUTH_DELETE_ACL (3008): the whole ACL, or one policy type, or the entries of some resources."""

    policy_type: str = text("policyType", "", max_chars=NAME_MAX_CHARS)
    resource: str = text("resource", "", max_chars=NAME_MAX_CHARS * 8)


class ListAclsRequestHeader(RequestHeader):
    """AUTH_LIST_ACL (3010)."""

    subject_filter: str = text("subjectFilter", "", max_chars=NAME_MAX_CHARS)
    resource_filter: str = text("resourceFilter", "", max_chars=NAME_MAX_CHARS)
