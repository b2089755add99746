"""The header of every request code the broker's remoting port serves (``protocol.request_headers``).

``BROKER_REQUEST_HEADERS`` maps each served code to its header (None: the code has no header fields), which the
handlers parse and the protocol fuzzer (tests) reads to build wrong values. The headers are the protocol's, but
for two fields this broker bounds further than the protocol does: a POP hands out at most one checkpoint's
messages, and hides them for at most ``MAX_INVISIBLE_MS``. docs/protocol.md ("Validation") lists the rules.
"""

from __future__ import annotations

from pocketmq.broker.pop.checkpoint import MAX_MESSAGES_PER_CK
from pocketmq.broker.pop.receive import MAX_INVISIBLE_MS
from pocketmq.protocol.codes import (
    ACTING_MASTER_HANDOVER,
    ACTING_PROGRESS_APPLIED,
    ACTING_PROGRESS_OFFER,
    AUTH_CREATE_ACL,
    AUTH_CREATE_USER,
    AUTH_DELETE_ACL,
    AUTH_DELETE_USER,
    AUTH_GET_ACL,
    AUTH_GET_USER,
    AUTH_LIST_ACL,
    AUTH_LIST_USER,
    AUTH_UPDATE_ACL,
    AUTH_UPDATE_USER,
    ESCAPE_PUT_MESSAGE,
    GET_GROUP_GRAY_CLIENTS,
    GET_TRANSACTION_STATUS,
    HA_EPOCHS,
    HA_PULL_COMMIT_LOG,
    HA_SYNC_METADATA,
    QUERY_STAGE_OFFSETS,
    REGISTER_POP_STAGES,
    UNREGISTER_POP_STAGES,
    UPDATE_STAGE_OFFSETS,
    RequestCode,
)
from pocketmq.protocol.consumer_admin_headers import (
    ClientRequestHeader,
    ConsumeMessageDirectlyRequestHeader,
    ResetOffsetRequestHeader,
)
from pocketmq.protocol.headers import RequestHeader
from pocketmq.protocol.request_headers import (
    AckMessageRequestHeader,
    AclRequestHeader,
    ActingProgressAppliedRequestHeader,
    ActingProgressOfferRequestHeader,
    BrokerNameRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    DeleteAclRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    EndTransactionRequestHeader,
    EscapePutMessageRequestHeader,
    GetConsumeStatsRequestHeader,
    GetTransactionStatusRequestHeader,
    GroupQueueRequestHeader,
    GroupRequestHeader,
    GroupTopicRequestHeader,
    HaPullRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    PopMessageRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    QueueRequestHeader,
    RecallMessageRequestHeader,
    RegisterPopStagesRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    TopicRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    UserRequestHeader,
    ViewMessageRequestHeader,
)


class BrokerPopMessageHeader(PopMessageRequestHeader):
    max_msg_nums = PopMessageRequestHeader.field("max_msg_nums").narrowed(MAX_MESSAGES_PER_CK, MAX_MESSAGES_PER_CK)
    invisible_time_ms = PopMessageRequestHeader.field("invisible_time_ms").narrowed(MAX_INVISIBLE_MS)


class BrokerChangeInvisibleTimeHeader(ChangeInvisibleTimeRequestHeader):
    invisible_time_ms = ChangeInvisibleTimeRequestHeader.field("invisible_time_ms").narrowed(MAX_INVISIBLE_MS)


# Every code the broker's remoting port serves -> its header (None: no header fields, a body or nothing).
BROKER_REQUEST_HEADERS: dict[int, type[RequestHeader] | None] = {
    RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeaderV2,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageRequestHeaderV2,
    ESCAPE_PUT_MESSAGE: EscapePutMessageRequestHeader,
    RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: QueueRequestHeader,
    RequestCode.GET_MAX_OFFSET: QueueRequestHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: QueueRequestHeader,
    RequestCode.HEART_BEAT: None,  # JSON body (remoting_broker.heartbeat_from_json)
    RequestCode.CHECK_CLIENT_CONFIG: None,  # JSON body (heartbeat_body.check_client_from_json)
    RequestCode.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GroupRequestHeader,
    RequestCode.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageRequestHeader,
    RequestCode.UPDATE_AND_CREATE_TOPIC: None,  # its header is a TopicConfig (remoting_admin.topic_config_from_header)
    RequestCode.GET_ALL_TOPIC_CONFIG: None,
    RequestCode.DELETE_TOPIC_IN_BROKER: TopicRequestHeader,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: None,  # JSON body (broker/groups.py)
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: None,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader,
    RequestCode.GET_CONSUME_STATS: GetConsumeStatsRequestHeader,
    RequestCode.GET_BROKER_CONFIG: None,
    RequestCode.UPDATE_BROKER_CONFIG: None,  # key=value body
    RequestCode.GET_BROKER_RUNTIME_INFO: None,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: GroupRequestHeader,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader,
    RequestCode.GET_CONSUMER_RUNNING_INFO: ClientRequestHeader,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyRequestHeader,
    RequestCode.POP_MESSAGE: BrokerPopMessageHeader,
    RequestCode.ACK_MESSAGE: AckMessageRequestHeader,
    RequestCode.BATCH_ACK_MESSAGE: None,  # JSON body
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: BrokerChangeInvisibleTimeHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    RequestCode.LOCK_BATCH_MQ: None,  # JSON body
    RequestCode.UNLOCK_BATCH_MQ: None,  # JSON body
    HA_PULL_COMMIT_LOG: HaPullRequestHeader,
    HA_SYNC_METADATA: BrokerNameRequestHeader,
    HA_EPOCHS: BrokerNameRequestHeader,
    ACTING_MASTER_HANDOVER: BrokerNameRequestHeader,
    ACTING_PROGRESS_APPLIED: ActingProgressAppliedRequestHeader,
    ACTING_PROGRESS_OFFER: ActingProgressOfferRequestHeader,
    QUERY_STAGE_OFFSETS: GroupQueueRequestHeader,
    UPDATE_STAGE_OFFSETS: GroupQueueRequestHeader,
    REGISTER_POP_STAGES: RegisterPopStagesRequestHeader,
    UNREGISTER_POP_STAGES: GroupTopicRequestHeader,
    GET_GROUP_GRAY_CLIENTS: GroupRequestHeader,
    RequestCode.END_TRANSACTION: EndTransactionRequestHeader,
    RequestCode.RESUME_CHECK_HALF_MESSAGE: ResumeCheckHalfMessageRequestHeader,
    GET_TRANSACTION_STATUS: GetTransactionStatusRequestHeader,
    RequestCode.RECALL_MESSAGE: RecallMessageRequestHeader,
    AUTH_CREATE_USER: UserRequestHeader,  # and a UserInfo JSON body
    AUTH_UPDATE_USER: UserRequestHeader,
    AUTH_DELETE_USER: UserRequestHeader,
    AUTH_GET_USER: UserRequestHeader,
    AUTH_LIST_USER: ListUsersRequestHeader,
    AUTH_CREATE_ACL: AclRequestHeader,  # and an AclInfo JSON body
    AUTH_UPDATE_ACL: AclRequestHeader,
    AUTH_DELETE_ACL: DeleteAclRequestHeader,
    AUTH_GET_ACL: AclRequestHeader,
    AUTH_LIST_ACL: ListAclsRequestHeader,
}
