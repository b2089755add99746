"""Request and response codes of RocketMQ's remoting protocol (RequestCode.java / ResponseCode.java),
plus PocketMQ's own request codes in a range RocketMQ does not use."""

from __future__ import annotations

import enum


class ResponseCode(enum.IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    INVALID_PARAMETER = 29
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    BROKER_NOT_EXIST = 211
    FLOW_CONTROL = 215
    ILLEGAL_OPERATION = 604
    GO_AWAY = 1500


class V2StatusCode(enum.IntEnum):
    """The status codes of the gRPC v2 protocol (``apache.rocketmq.v2.Code``); the values are the wire numbers.

    Written out rather than read from the protobuf module so that the checker knows every member and the error
    mapping (``error_codes``) imports no protobuf; a unit test checks the set against the protobuf enum.
    """

    CODE_UNSPECIFIED = 0
    OK = 20000
    MULTIPLE_RESULTS = 30000
    BAD_REQUEST = 40000
    ILLEGAL_ACCESS_POINT = 40001
    ILLEGAL_TOPIC = 40002
    ILLEGAL_CONSUMER_GROUP = 40003
    ILLEGAL_MESSAGE_TAG = 40004
    ILLEGAL_MESSAGE_KEY = 40005
    ILLEGAL_MESSAGE_GROUP = 40006
    ILLEGAL_MESSAGE_PROPERTY_KEY = 40007
    INVALID_TRANSACTION_ID = 40008
    ILLEGAL_MESSAGE_ID = 40009
    ILLEGAL_FILTER_EXPRESSION = 40010
    ILLEGAL_INVISIBLE_TIME = 40011
    ILLEGAL_DELIVERY_TIME = 40012
    INVALID_RECEIPT_HANDLE = 40013
    MESSAGE_PROPERTY_CONFLICT_WITH_TYPE = 40014
    UNRECOGNIZED_CLIENT_TYPE = 40015
    MESSAGE_CORRUPTED = 40016
    CLIENT_ID_REQUIRED = 40017
    ILLEGAL_POLLING_TIME = 40018
    ILLEGAL_OFFSET = 40019
    ILLEGAL_LITE_TOPIC = 40020
    UNAUTHORIZED = 40100  # access control refused (docs/security.md)
    PAYMENT_REQUIRED = 40200
    FORBIDDEN = 40300
    NOT_FOUND = 40400
    MESSAGE_NOT_FOUND = 40401
    TOPIC_NOT_FOUND = 40402
    CONSUMER_GROUP_NOT_FOUND = 40403
    OFFSET_NOT_FOUND = 40404
    REQUEST_TIMEOUT = 40800
    PAYLOAD_TOO_LARGE = 41300
    MESSAGE_BODY_TOO_LARGE = 41301
    MESSAGE_BODY_EMPTY = 41302
    PRECONDITION_FAILED = 42800
    TOO_MANY_REQUESTS = 42900
    LITE_TOPIC_QUOTA_EXCEEDED = 42901
    LITE_SUBSCRIPTION_QUOTA_EXCEEDED = 42902
    REQUEST_HEADER_FIELDS_TOO_LARGE = 43100
    MESSAGE_PROPERTIES_TOO_LARGE = 43101
    INTERNAL_ERROR = 50000
    INTERNAL_SERVER_ERROR = 50001
    HA_NOT_AVAILABLE = 50002
    NOT_IMPLEMENTED = 50100
    PROXY_TIMEOUT = 50400
    MASTER_PERSISTENCE_TIMEOUT = 50401
    SLAVE_PERSISTENCE_TIMEOUT = 50402
    UNSUPPORTED = 50500
    VERSION_UNSUPPORTED = 50501
    VERIFY_FIFO_MESSAGE_UNSUPPORTED = 50502
    FAILED_TO_CONSUME_MESSAGE = 60000


class RequestCode(enum.IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    CHECK_CLIENT_CONFIG = 46  # a 4.x client asks whether the broker can filter by its (SQL92) subscription
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    RESET_CONSUMER_CLIENT_OFFSET = 220
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    GET_TOPICS_BY_CLUSTER = 224
    GET_CONSUMER_RUNNING_INFO = 307
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    RESUME_CHECK_HALF_MESSAGE = 323
    RECALL_MESSAGE = 370
    QUERY_ASSIGNMENT = 400
    BROKER_HEARTBEAT = 904
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    BATCH_ACK_MESSAGE = 200151


# RocketMQ 5's user and ACL admin requests (ACL 2.0; server/remoting_auth_admin.py, docs/security.md).
AUTH_CREATE_USER = 3001
AUTH_UPDATE_USER = 3002
AUTH_DELETE_USER = 3003
AUTH_GET_USER = 3004
AUTH_LIST_USER = 3005
AUTH_CREATE_ACL = 3006
AUTH_UPDATE_ACL = 3007
AUTH_DELETE_ACL = 3008
AUTH_GET_ACL = 3009
AUTH_LIST_ACL = 3010
AUTH_READ_CODES = frozenset({AUTH_GET_USER, AUTH_LIST_USER, AUTH_GET_ACL, AUTH_LIST_ACL})

# The binary header's code is an int16; some sources send the POP codes as their int16 truncations.
INT16_ALIASES = {
    3442: RequestCode.POP_MESSAGE,
    3443: RequestCode.ACK_MESSAGE,
    3445: RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
    3543: RequestCode.BATCH_ACK_MESSAGE,
}

# PocketMQ's own request codes live at 30000-30999 (unused by RocketMQ); docs/protocol.md lists them.
POCKETMQ_CODE_BASE = 30000
# Master/slave replication (cluster/ha_*.py, docs/ha.md).
HA_PULL_COMMIT_LOG = POCKETMQ_CODE_BASE + 100  # a slave asks for commit log bytes from a phys offset
HA_SYNC_METADATA = POCKETMQ_CODE_BASE + 101  # a slave asks for topics, groups and consumer offsets
HA_EPOCHS = POCKETMQ_CODE_BASE + 102  # a slave asks for the master's replication epochs (before following it)
# Slave acting master (broker/acting_services.py, docs/ha.md): a returning master takes its services back.
ACTING_MASTER_HANDOVER = POCKETMQ_CODE_BASE + 110  # master -> slave: stop acting, send your acting progress
ACTING_PROGRESS_APPLIED = POCKETMQ_CODE_BASE + 111  # master -> slave: progress up to a version is stored here
ESCAPE_PUT_MESSAGE = POCKETMQ_CODE_BASE + 112  # acting slave -> another master: SEND_MESSAGE_V2, revive topic too
ACTING_PROGRESS_OFFER = POCKETMQ_CODE_BASE + 113  # slave -> its master, back without a restart: take my progress
# Staged concurrency (client/stages.py, docs/staged.md): a queue's stage offsets, stored by the broker.
QUERY_STAGE_OFFSETS = POCKETMQ_CODE_BASE + 200
UPDATE_STAGE_OFFSETS = POCKETMQ_CODE_BASE + 201
# Staged POP (broker/pop/staged.py): a (group, topic)'s stage definitions, which the broker's pops follow.
REGISTER_POP_STAGES = POCKETMQ_CODE_BASE + 210
UNREGISTER_POP_STAGES = POCKETMQ_CODE_BASE + 211
# Gray release (broker/gray_split.py, docs/gray.md): a group's live clients, gray or not, and their queues.
GET_GROUP_GRAY_CLIENTS = POCKETMQ_CODE_BASE + 400
# Transactions (broker/transaction, docs/transactions.md): pending half messages per topic and those put aside.
GET_TRANSACTION_STATUS = POCKETMQ_CODE_BASE + 500


def canonical_request_code(code: int) -> int:
    return INT16_ALIASES.get(code, code)
