"""Building a broker's ``PopService`` from its configuration and services (called by ``broker.wiring``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.broker.pop.engine import PopService
from pocketmq.broker.pop.fifo import FifoPopState
from pocketmq.broker.pop.read_routing import ReaderRouter
from pocketmq.broker.pop.reader import LocalMessageReader
from pocketmq.broker.pop.reference_resolver import ReferenceResolver
from pocketmq.broker.pop.revive import REVIVE_GROUP, ReviveService
from pocketmq.broker.pop.revive_queue import ReviveQueue
from pocketmq.broker.pop.staged import PopStageRegistry
from pocketmq.broker.pop.waiters import PopWaiters
from pocketmq.cluster.remote_reader import RemoteMessageReader
from pocketmq.common.topic import revive_topic

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker
    from pocketmq.broker.write_path import WritePathSwitch
    from pocketmq.store.message_store import MessageStore


def build_pop_service(
    broker: Broker, store: MessageStore, write_path: WritePathSwitch, fifo: FifoPopState
) -> PopService:
    """``broker``'s metadata tables, clock, metrics and settings; ``store``, ``write_path`` and ``fifo``: the ones
    of the services being built (``broker.wiring``)."""
    config = broker.config
    topic = revive_topic(config.cluster_name)
    topic_config = broker.topics.get_or_create(topic)
    queues = []
    for queue_id in range(topic_config.write_queue_nums):
        committed = broker.offsets.query(REVIVE_GROUP, topic, queue_id)
        queues.append(ReviveQueue(store, topic, queue_id, broker.broker_name, committed or 0))
    stages = PopStageRegistry(config.metadata_dir() / "pop_stages.json")
    stages.load()
    readers = build_reader_router(broker, store)
    revive = ReviveService(
        queues,
        readers,
        store,
        broker.groups,
        broker.offsets,
        broker.topics,
        broker.clock,
        policy=config.ck_rewrite_policy(),
        interval_ms=config.pop_revive_interval_ms,
        write_path=write_path,
        # A staged queue's own CKs come back in place through its gate; one escaped here from another group
        # (its slave acting as master) is this broker's to revive like any other: nothing else would.
        handled_elsewhere=lambda ck: ck.broker_name in ("", broker.broker_name) and stages.handled_elsewhere(ck),
        metrics=broker.metrics,
    )
    return PopService(
        store=store,
        topics=broker.topics,
        groups=broker.groups,
        offsets=broker.offsets,
        clock=broker.clock,
        broker_name=broker.broker_name,
        revive=revive,
        revive_queues=queues,
        fifo=fifo,
        stages=stages,
        waiters=PopWaiters(config.long_polling_max_waiters),
        min_invisible_ms=config.pop_min_invisible_ms,
        persist_interval_ms=config.pop_state_persist_interval_ms,
        write_path=write_path,
        durable_timeout_ms=config.sync_flush_timeout_ms,
        gray=broker.gray,
        traffic=broker.traffic,
        metrics=broker.metrics,
        # references are tried again as often as a CK whose read failed first is (the table is dynamic)
        references=ReferenceResolver(
            store,
            readers,
            write_path,
            broker.clock,
            wait_ms=lambda: revive.policy.backoff_ms[0],
            metrics=broker.metrics,
        ),
    )


def build_reader_router(broker: Broker, store: MessageStore) -> ReaderRouter:
    """This broker's store for its own group; for every other group a ``RemoteMessageReader`` (built on first
    use, through this broker's name servers), all sharing the broker's ``BreakerBoard``."""

    def remote(broker_name: str) -> RemoteMessageReader:
        # The broker's own board: its settings change at run time (pocketmq config set) and it counts into the
        # broker's metrics. The timeout and retry delays are read from the broker's config at each read, so a
        # change applies to the readers built already too.
        return RemoteMessageReader(
            broker_name,
            broker.namesrv_client(),
            broker.remoting_client,
            breakers=broker.breakers,
            clock=broker.clock,
            settings=lambda: broker.config.remote_read_settings(),
        )

    return ReaderRouter(broker.broker_name, LocalMessageReader(store), remote)
