"""PocketMQ's Python SDK on RocketMQ's remoting protocol.

Every client has an asyncio core (``AsyncProducer``, ``AsyncPullConsumer``, ``AsyncAdmin``) and a synchronous
facade of the same API (``Producer``, ``PullConsumer``, ``Admin``) that runs the core on one background loop
thread per process. See docs/sdk.md.

>>> from pocketmq.client import ClientConfig, Message, Producer
>>> with Producer(ClientConfig(namesrv_addr="127.0.0.1:9876")) as producer:
...     result = producer.send(Message.create("orders", "hello", tags="created", keys="order-1"))
"""

from pocketmq.client.admin import Admin, AsyncAdmin, GroupConfig, QueueStatus, TopicStatus
from pocketmq.client.config import ClientConfig
from pocketmq.client.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    ConsumeStagedConcurrentlyContext,
    StagedConcurrentListener,
)
from pocketmq.client.producer import AsyncProducer, Producer, ProducerOptions, SendResult, SendStatus
from pocketmq.client.pull_consumer import AsyncPullConsumer, PullConsumer, PullResult, PullStatus
from pocketmq.client.push_consumer import (
    AsyncPushConsumer,
    ConsumeFromWhere,
    MessageModel,
    PushConsumer,
    PushConsumerOptions,
)
from pocketmq.client.queue_select import (
    FunctionSelector,
    GraySelector,
    KeyHashSelector,
    MessageGroupSelector,
    QueueSelector,
    RandomSelector,
    RoundRobinSelector,
)
from pocketmq.client.rebalance import (
    ConsistentHashAllocator,
    GrayAllocator,
    allocate_averagely,
    allocate_averagely_by_circle,
)
from pocketmq.client.selector import MessageSelector
from pocketmq.client.simple_consumer import AsyncSimpleConsumer, SimpleConsumer
from pocketmq.client.staged_simple_consumer import AsyncStagedSimpleConsumer, StagedSimpleConsumer
from pocketmq.client.transaction_producer import (
    AsyncTransactionProducer,
    LocalTransactionState,
    TransactionProducer,
    TransactionSendResult,
)
from pocketmq.common.gray import GRAY_PROPERTY
from pocketmq.common.message import Message, MessageExt, MessageQueue
from pocketmq.common.topic import MessageType

__all__ = [
    "AsyncPushConsumer",
    "ConsistentHashAllocator",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumeStagedConcurrentlyContext",
    "FunctionSelector",
    "GRAY_PROPERTY",
    "GrayAllocator",
    "GraySelector",
    "KeyHashSelector",
    "MessageModel",
    "PushConsumer",
    "PushConsumerOptions",
    "RandomSelector",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "Admin",
    "AsyncAdmin",
    "AsyncProducer",
    "AsyncPullConsumer",
    "AsyncSimpleConsumer",
    "AsyncStagedSimpleConsumer",
    "AsyncTransactionProducer",
    "ClientConfig",
    "GroupConfig",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageGroupSelector",
    "MessageQueue",
    "MessageSelector",
    "MessageType",
    "Producer",
    "ProducerOptions",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "QueueSelector",
    "QueueStatus",
    "RoundRobinSelector",
    "SendResult",
    "SendStatus",
    "SimpleConsumer",
    "StagedConcurrentListener",
    "StagedSimpleConsumer",
    "TopicStatus",
    "TransactionProducer",
    "TransactionSendResult",
]
