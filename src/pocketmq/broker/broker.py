"""The ``Broker`` facade: one broker's services composed over its store, which both front ends call.

Lifecycle::

    broker = Broker(config)                 # metadata tables and client registries built, nothing opened
    await broker.start(remoting_port=P, grpc_port=G)   # metadata loaded, store recovered, the services on it
                                            # built for the role (broker.wiring), tasks running,
                                            # registered with the name servers (when it knows any)
    ...                                     # front ends call broker.messages / topics / groups / offsets ...
    await broker.shutdown()                 # unregister, stop tasks, release held pulls, persist, close store

The services that stand on the store (``store``, ``messages``, ``timer``, ``send_back``, ``pop``, ...) exist
from ``start`` on; asked for before, they raise ServiceNotAvailableError.

``remoting_port`` / ``grpc_port`` are the ports the front ends actually bound (they may be configured as 0);
the remoting one is baked into offset message ids and the advertised address, so the front ends bind first
and requests that arrive before ``start`` returns are answered SERVICE_NOT_AVAILABLE by them.

Periodic tasks (``runtime.periodic``, on the broker's clock, failures in its metrics; stopped at shutdown after
their round in progress): persist consumer offsets every ``offset_persist_interval_ms``; save the replication
epochs every second; expire silent producers and consumers every ``client_scan_interval_ms``; the timer's
delivery, POP's revive and state saving, the transaction check, a slave's metadata sync and acting-master
election (and, while it acts, its POP state saving); the registrar re-registers every ``register_interval_ms``
and at once after a topic change. A slave's replication stream is a task of its own, reported if an error ends
it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import shutil
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from pocketmq.broker.access import AccessControl
from pocketmq.broker.acting_services import ReturningMaster, take_offered, take_services_back
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.consumers import ConsumerRegistry
from pocketmq.broker.dynamic_config import changed_config, persist_changes, with_persisted_changes
from pocketmq.broker.gray_split import GraySplits
from pocketmq.broker.groups import SubscriptionGroupManager
from pocketmq.broker.long_polling import PullHoldService
from pocketmq.broker.messages import MessageService
from pocketmq.broker.offset_reset import ResetFences
from pocketmq.broker.offsets import ConsumerOffsetManager, persist_behind_commit_log
from pocketmq.broker.producers import ProducerRegistry
from pocketmq.broker.queue_locks import QueueLockTable
from pocketmq.broker.stage_offsets import StageOffsetManager
from pocketmq.broker.state_metrics import state_families
from pocketmq.broker.subscription_filters import SubscriptionFilters
from pocketmq.broker.timer.service import TimerService
from pocketmq.broker.topics import TopicManager, system_topics
from pocketmq.broker.traffic import Traffic
from pocketmq.broker.transaction.channels import ProducerChannels
from pocketmq.broker.wiring import ActingRole, BrokerServices, build_services, read_only_reason, returning_master
from pocketmq.broker.write_path import WritePathSwitch
from pocketmq.cluster.breaker import BreakerBoard
from pocketmq.cluster.ha_epochs import EpochFile
from pocketmq.cluster.namesrv_client import NamesrvClient
from pocketmq.common.errors import (
    BadRequestError,
    ConfigError,
    NoPermissionError,
    PocketMQError,
    ServiceNotAvailableError,
)
from pocketmq.metrics import MetricsRegistry
from pocketmq.protocol.route import BrokerFlags, RegisterBrokerBody
from pocketmq.protocol.transport import RemotingClient
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock
from pocketmq.runtime.loop_lag import LoopLagMonitor
from pocketmq.runtime.periodic import PeriodicTask, spawn_watched
from pocketmq.store.message_store import MessageStore

if TYPE_CHECKING:
    from pocketmq.broker.ha_slave import HaSlave
    from pocketmq.broker.lite.service import LiteService
    from pocketmq.broker.pop.engine import PopService
    from pocketmq.broker.send_back import SendBackService
    from pocketmq.broker.transaction.service import TransactionService
    from pocketmq.cluster.epoch_fence import EpochFence
    from pocketmq.cluster.ha_master import HaMaster
    from pocketmq.cluster.registrar import BrokerRegistrar

log = logging.getLogger(__name__)
LOOP_LAG_INTERVAL_MS = 50  # how often the broker samples its event loop's lag (pocketmq_event_loop_* metrics)

EPOCH_SAVE_INTERVAL_MS = 1_000  # how stale the saved confirmed offset may be after a kill -9 (cluster.ha_epochs)


class Broker:
    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK, *, metrics: MetricsRegistry | None = None):
        problem = config.role_problem() or config.access_problem()
        if problem:
            raise ConfigError(problem)
        config = with_persisted_changes(config)  # run-time changes (UPDATE_BROKER_CONFIG) outlive restarts
        self.config = config
        self.clock = clock
        self.metrics = metrics if metrics is not None else MetricsRegistry()  # this broker's (docs/metrics.md)
        self.breakers = BreakerBoard(config.breaker_settings(), metrics=self.metrics)  # one per remote broker
        self.loop_lag = LoopLagMonitor(LOOP_LAG_INTERVAL_MS, metrics=self.metrics)  # how long the loop was held
        self.traffic = Traffic()  # messages in and out, counted by the send and read paths
        self.metrics.add_source(self.traffic.families)
        self.metrics.add_source(
            lambda: state_families(self, self._services)
        )  # storage, lag, POP in flight, timer backlog
        self._config_updates = self.metrics.counter("pocketmq_config_updates_total", "Accepted run-time config changes")
        meta = config.metadata_dir()
        self.topics = TopicManager(
            meta / "topics.json",
            auto_create_enabled=config.auto_create_topic_enable,
            default_queue_nums=config.default_topic_queue_nums,
            builtin=system_topics(config.cluster_name, config.broker_name, config.default_topic_queue_nums),
        )
        self.groups = SubscriptionGroupManager(meta / "groups.json", auto_create=config.auto_create_subscription_group)
        self.offsets = ConsumerOffsetManager(meta / "consumer_offsets.json")
        self.offset_fences = ResetFences()  # clients' commits not stored right after an offset reset
        self.stage_offsets = StageOffsetManager(meta / "consumer_stage_offsets.json")  # staged consumers
        self.consumers = ConsumerRegistry(config.client_channel_expire_ms, clock=clock)
        self.gray = GraySplits(self.groups)  # POP's server-side gray split; the gRPC front end adds its sessions
        self.gray.add_member_source(self.consumers.subscribers)
        self.producers = ProducerRegistry(config.client_channel_expire_ms, clock=clock)
        self.holds = PullHoldService(config.long_polling_max_waiters)
        # compiled subscription filters, shared by pulls and POP (docs/filter.md)
        self.filters = SubscriptionFilters(lambda: self.config.enable_property_filter)
        self.epochs = EpochFile(config.data_dir)  # replication epochs and confirmed offset (cluster.ha_epochs)
        # Under a controller (serve --controller sets it before start): replication fenced by its epoch.
        self.epoch_fence: EpochFence | None = None
        self.queue_locks = QueueLockTable(config.queue_lock_max_live_ms)  # orderly consumers' queue locks
        self.transaction_channels = ProducerChannels()  # the front ends add the producers a check can go to
        # What stands on the store (the store too), for this broker's role: built at start (broker.wiring).
        self._services: BrokerServices | None = None
        self.access = AccessControl(config, self.metrics)  # users, ACLs, the check both front ends make
        self.access.bootstrap()
        # to the name servers and other brokers: TLS when configured (tls_enable, or tls_mode enforcing), signed
        # with the cluster's inner credentials when it has them
        self.remoting_client = RemotingClient(
            ssl_context=config.tls_settings().client_context(), credentials=config.inner_credentials()
        )
        self._namesrv = NamesrvClient(_split_addrs(config.namesrv_addr), self.remoting_client)
        self._registrar: BrokerRegistrar | None = None  # with name servers: registers this broker with them
        self._returning: ReturningMaster | None = None  # a master with name servers: takes its slaves' progress
        self._remoting_port = config.remoting_port
        self._grpc_port: int | None = None
        self._periodic: list[PeriodicTask] = []  # started by start(), stopped by shutdown()
        self._tasks: list[asyncio.Task] = []  # tasks that are not periodic (a slave's replication stream)
        self.boot_timestamp_ms = 0
        self.started = False

    # -- identity ---------------------------------------------------------------------------------------------------
    @property
    def broker_name(self) -> str:
        return self.config.broker_name

    @property
    def broker_addr(self) -> str:
        """The advertised remoting address (what routes and the name server carry)."""
        return self.config.public_addr(self._remoting_port)

    @property
    def grpc_addr(self) -> str | None:
        return None if self._grpc_port is None else f"{self.config.public_host}:{self._grpc_port}"

    def namesrv_client(self) -> NamesrvClient:
        """Fetches topic routes (over every broker) and cluster info from this broker's name servers."""
        return self._namesrv

    # -- the services built at start (broker.wiring) ----------------------------------------------------------------
    @property
    def services(self) -> BrokerServices:
        """Everything built at start for this broker's role; ServiceNotAvailableError before."""
        if self._services is None:
            raise ServiceNotAvailableError(f"broker {self.broker_name} is not started")
        return self._services

    @property
    def store(self) -> MessageStore:
        return self.services.store

    @property
    def messages(self) -> MessageService:
        return self.services.messages

    @property
    def timer(self) -> TimerService:
        """Delayed and timer messages."""
        return self.services.timer

    @property
    def transactions(self) -> TransactionService:
        """Half messages, their endings and the check loop (docs/transactions.md)."""
        return self.services.transactions

    @property
    def send_back(self) -> SendBackService:
        """Consumer retries and the DLQ."""
        return self.services.send_back

    @property
    def pop(self) -> PopService:
        return self.services.pop

    @property
    def lite(self) -> LiteService:
        """Lite topics under LITE parent topics (docs/lite.md)."""
        return self.services.lite

    @property
    def write_path(self) -> WritePathSwitch:
        """Where the timer, revive and the pop engine write (broker.write_path)."""
        return self.services.write_path

    @property
    def ha_master(self) -> HaMaster | None:
        """A master's: serves its slaves."""
        return self._services.ha_master if self._services is not None else None

    @property
    def ha_slave(self) -> HaSlave | None:
        """A slave's: follows its master."""
        return self._services.ha_slave if self._services is not None else None

    @property
    def acting(self) -> ActingRole | None:
        """A slave's acting services and their election (RIP-32)."""
        return self._services.acting if self._services is not None else None

    async def take_offered_progress(self, broker_id: int, slave_addr: str) -> None:
        """ACTING_PROGRESS_OFFER: a slave that acted while this master was frozen or cut off offers what it did
        (``broker.acting_services.take_offered``)."""
        if self._returning is None or not self.config.enable_slave_acting_master:
            raise NoPermissionError(
                f"{self.broker_addr} takes no acting progress: it is not a master with enable_slave_acting_master "
                "and a name server"
            )
        await take_offered(self._returning, broker_id, slave_addr)

    # -- lifecycle --------------------------------------------------------------------------------------------------
    async def start(self, *, remoting_port: int | None = None, grpc_port: int | None = None) -> None:
        """Open everything; ``remoting_port`` / ``grpc_port``: the ports the front ends bound (None: as
        configured / no gRPC front end)."""
        if self.started:
            return
        self.loop_lag.start()
        if remoting_port is not None:
            self._remoting_port = remoting_port
        self._grpc_port = grpc_port
        self.boot_timestamp_ms = self.clock.now_ms()
        self.topics.load()
        self.groups.load()
        self.offsets.load()
        self.stage_offsets.load()
        store = MessageStore(
            self.config.store_config(self._remoting_port),
            clock=self.clock,
            metrics=self.metrics,
            read_only_reason=read_only_reason(self.config),
        )
        report = store.start()
        log.info(
            "event=store_recovered max_phys_offset=%d dropped_bytes=%d corrupt_regions=%d",
            report.max_phys_offset,
            report.dropped_bytes,
            report.corrupt_regions,
        )
        self.epochs.load()
        store.add_arrival_listener(self.holds.notify_arrival)
        self.topics.add_listener(self._topics_changed)
        services = self._services = build_services(self, store)
        services.lite.start()
        store.add_arrival_listener(services.lite.on_arrival)
        services.timer.start()
        if self.config.is_slave:  # delivery, revive and the transaction check run only while it acts as master
            self._start_slave(services)
        else:
            # The tenure begins where recovery ended, before this incarnation's first write (the handover's ACK
            # records are its first): a slave compares epochs to find where their logs part, so a write before
            # the tenure would sit in the previous master's epoch, and a slave holding that epoch's original
            # records there could never find the common prefix.
            self._begin_tenure(store)
            if self._namesrv.addrs:
                self._returning = returning_master(self, services)
                if self.config.enable_slave_acting_master:
                    await take_services_back(self._returning)  # before its timer and revive run
            services.timer.start_delivery()
            services.pop.start()
            if services.tracer is not None:
                services.tracer.writer.start()
            await services.transactions.start()
            self._start_master(services)
        self._every("persist-offsets", self.config.offset_persist_interval_ms, self._persist_offsets_durably)
        self._every("save-epochs", EPOCH_SAVE_INTERVAL_MS, self._save_epochs)
        self._every("expire-clients", self.config.client_scan_interval_ms, self._expire_clients)
        self._every("lite-expiry", self.config.client_scan_interval_ms, self._lite_round)
        if self._namesrv.addrs:
            self._registrar = self._make_registrar()
            await self._registrar.start()
        self.started = True
        log.info(
            "event=broker_started name=%s addr=%s grpc=%s namesrv=%s topics=%d",
            self.broker_name,
            self.broker_addr,
            self.grpc_addr,
            self.config.namesrv_addr,
            len(self.topics.names()),
        )

    def _lite_round(self) -> None:
        """Expire idle lite topics and silent lite subscribers, save the groups' lite progress."""
        services = self.services
        services.lite.expire()
        if not self.config.is_slave:
            services.lite.persist()

    def _begin_tenure(self, store: MessageStore) -> None:
        fence = self.epoch_fence
        epoch = self.epochs.begin_tenure(
            store.max_phys_offset, store.min_phys_offset, controller_epoch=fence.master_epoch if fence else 0
        )
        log.info(
            "event=master_tenure_started epoch=%d start_phys_offset=%d tenure_id=%s",
            epoch.epoch,
            epoch.start_phys_offset,
            epoch.tenure_id,
        )

    def _start_master(self, services: BrokerServices) -> None:
        assert services.ha_master is not None  # a master's services have one
        services.ha_master.start()

    def _start_slave(self, services: BrokerServices) -> None:
        assert services.ha_slave is not None and services.acting is not None  # a slave's services have both
        services.pop.fifo.load()  # its copy of the master's (a master's POP loads it when it starts)
        self._tasks.append(
            spawn_watched(services.ha_slave.run_replication(), "broker-ha-replication", metrics=self.metrics)
        )
        self._every(
            "ha-metadata",
            self.config.ha_metadata_sync_interval_ms,
            services.ha_slave.sync_metadata_once,
            immediately=True,
            expected=(PocketMQError, ValueError),  # the master or the name server away: no traceback
        )
        services.acting.election.start()  # slave acting master (RIP-32): runs while the election says so

    def _make_registrar(self) -> BrokerRegistrar:
        from pocketmq.cluster.registrar import BrokerRegistrar

        return BrokerRegistrar(
            self._namesrv.addrs,
            self.remoting_client,
            self.registration_body,
            self.config.register_interval_ms,
            self.clock,
            cluster_name=self.config.cluster_name,
            broker_name=self.broker_name,
            broker_id=self.config.broker_id,
            broker_addr=self.broker_addr,
            metrics=self.metrics,
        )

    async def shutdown(self) -> None:
        """Unregister, stop periodic work, let held pulls answer, close (flush) the store, persist offsets."""
        if not self.started:
            return
        self.started = False
        if self._registrar is not None:
            try:
                await self._registrar.unregister()
            except Exception as exc:  # the name servers drop us after their expiry anyway
                log.warning("event=unregister_failed error=%s", exc)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, *(p.stop() for p in self._periodic), return_exceptions=True)
        services = self.services
        if services.acting is not None:
            await services.acting.election.stop()  # its services too, when acting
        await services.timer.stop_delivery()
        self._tasks.clear()
        self._periodic.clear()
        self.loop_lag.stop()
        self.holds.wake_all()
        # A full disk must not stop the shutdown (nor fail it): for what a step could not write, the state
        # last persisted stands, as after a crash.
        await _persisting("timer", services.timer.stop)
        await _persisting("transactions", services.transactions.stop)
        if services.pop.running:
            await _persisting("pop", services.pop.stop)
        if services.tracer is not None:
            await services.tracer.writer.stop()  # its last records go through the store, still open
        await services.store.shutdown()  # flushed first: the offsets below stand on it
        await _persisting("offsets", self._persist_offsets)
        if not self.config.is_slave:
            await _persisting("lite offsets", services.lite.persist)
        await _persisting("epochs", self.epochs.save_if_changed)
        await self.remoting_client.close()
        log.info("event=broker_stopped name=%s", self.broker_name)

    def periodic(
        self, name: str, interval_ms: float | Callable[[], float], action: Callable[[], object], **options
    ) -> PeriodicTask:
        """A periodic task (not started) on this broker's clock, counting its failures in its metrics."""
        return PeriodicTask(f"broker-{name}", action, interval_ms, clock=self.clock, metrics=self.metrics, **options)

    def _every(self, name: str, interval_ms: int, action: Callable[[], object], **options) -> None:
        task = self.periodic(name, interval_ms, action, **options)
        task.start()
        self._periodic.append(task)

    async def _save_epochs(self) -> None:
        """The confirmed offset moves with SYNC acks: saved once a period (off the loop), not per ack."""
        await asyncio.to_thread(self.epochs.save_if_changed)

    def _persist_offsets(self) -> None:
        self.offsets.persist()
        self.stage_offsets.persist()

    async def _persist_offsets_durably(self) -> None:
        """The periodic offset write: behind the commit log (broker.offsets.persist_behind_commit_log)."""
        await persist_behind_commit_log(self.offsets, self.store, self.config.sync_flush_timeout_ms)
        self.stage_offsets.persist()  # stage records stand on client commits only

    def _expire_clients(self) -> None:
        self.consumers.expire()
        self.producers.expire()

    # -- registration -----------------------------------------------------------------------------------------------
    def registration_body(self, topics: Collection[str] | None = None) -> RegisterBrokerBody:
        """What REGISTER_BROKER carries: the named topics (None: every topic; a deleted one is left out), the
        table's version, and PocketMQ's flags."""
        flags = BrokerFlags(
            grpc_addr=self.grpc_addr,
            auto_create_topic_enable=self.config.auto_create_topic_enable,
            default_topic_queue_nums=self.config.default_topic_queue_nums,
        )
        # the version before the table: a table newer than the version it is sent with is applied again at the
        # next version, while the reverse would leave the name server believing it has a change it was not sent
        version = self.data_version(self.topics.data_version)
        if topics is None:
            configs = tuple(self.topics.all())
        else:
            configs = tuple(config for name in sorted(topics) if (config := self.topics.get(name)) is not None)
        return RegisterBrokerBody(configs, version, flags)

    def data_version(self, counter: int) -> dict:
        """RocketMQ's DataVersion of a table of this broker."""
        return {"timestamp": self.boot_timestamp_ms, "counter": counter, "stateVersion": 0}

    async def register_now(self) -> None:
        """Send the name servers the topic changes made so far (none without them): routes show them after."""
        if self._registrar is not None:
            await self._registrar.register_now()

    def _topics_changed(self, topic: str | None = None) -> None:
        # TopicManager may call from a gRPC worker thread; the registrar takes it to the loop.
        if self._registrar is not None:
            deleted = topic is not None and self.topics.get(topic) is None
            self._registrar.trigger(topic, whole_table=deleted)

    # -- operations over several services -------------------------------------------------------------------------
    def delete_topic(self, topic: str) -> bool:
        """Remove a topic, its stored messages and its consumer offsets; False when it was not here."""
        existed = self.topics.delete(topic)
        self.store.delete_topic(topic)
        self.offsets.remove_topic(topic)
        return existed

    def delete_group(self, group: str, *, clean_offsets: bool) -> bool:
        removed = self.groups.delete(group)
        if clean_offsets:
            self.offsets.remove_group(group)
            self.stage_offsets.remove_group(group)
            if self._services is not None:
                self._services.pop.staged.registry.remove_group(group)
        return removed

    def update_config(self, changes: dict[str, str]) -> BrokerConfig:
        """Apply dynamic settings at once (see broker.dynamic_config); BadRequestError refuses the lot."""
        if not changes:
            raise BadRequestError("no setting to change")
        new = changed_config(self.config, changes)
        persist_changes(new, changes)  # first: a change that cannot be kept is not made
        self.config = new
        self.breakers.configure(new.breaker_settings())
        if self._services is not None:
            self._services.pop.revive.policy = new.ck_rewrite_policy()
            self._services.pop.revive.settings_changed()  # e.g. escape turned on: a blocked revive tries again now
            self._services.transactions.wake()  # its next round reads the new check settings now
        self.topics.set_auto_create(new.auto_create_topic_enable, new.default_topic_queue_nums)
        self.groups.set_auto_create(new.auto_create_subscription_group)
        if self._services is not None:
            self._services.messages.configure(
                max_properties_bytes=new.max_properties_bytes,
                long_polling_enable=new.long_polling_enable,
                short_polling_ms=new.short_polling_ms,
            )
        log.info("event=config_updated changes=%s", ",".join(f"{k}={v}" for k, v in sorted(changes.items())))
        self._config_updates.inc()
        self._topics_changed()  # the name server learns the new auto-create flags
        return new

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's table (RocketMQ's names where they exist)."""
        services = self._services
        info = {
            "brokerVersionDesc": "PocketMQ",
            "brokerName": self.broker_name,
            "brokerAddr": self.broker_addr,
            "grpcAddr": self.grpc_addr or "",
            "bootTimestamp": str(self.boot_timestamp_ms),
            "runtime": f"{(self.clock.now_ms() - self.boot_timestamp_ms) // 1000}s",
            "msgPutTotalTodayNow": str(services.messages.put_messages_total if services else 0),
            "msgGetTotalTodayNow": str(services.messages.got_messages_total if services else 0),
            "topicCount": str(len(self.topics.names())),
            "subscriptionGroupCount": str(len(self.groups.all())),
            "consumerGroupsOnline": str(len(self.consumers.table.groups())),
            "producerGroupsOnline": str(len(self.producers.groups())),
            "pullsHeld": str(self.holds.held),
            "flushMode": self.config.flush_mode.value,
            "brokerRole": self.config.broker_role.name,
            "brokerId": str(self.config.broker_id),
        }
        if services is not None:
            info["timerOutstanding"] = str(services.timer.outstanding)
            if services.transactions.table is not None:
                info["transactionHalfPending"] = str(len(services.transactions.table))
            if services.ha_master is not None:
                info.update(services.ha_master.runtime_info())
            if services.ha_slave is not None:
                info["masterAddr"] = services.ha_slave.master_addr or ""
        if self.epoch_fence is not None:
            info.update(self.epoch_fence.runtime_info())
        info["breakerStates"] = json.dumps({name: state.value for name, state in self.breakers.states().items()})
        if services is not None:
            if services.acting is not None:
                info.update(services.acting.services.runtime_info(services.acting.acting))
            info["commitLogMinOffset"] = str(services.store.min_phys_offset)
            info["commitLogMaxOffset"] = str(services.store.max_phys_offset)
        try:
            disk = shutil.disk_usage(self.config.data_dir)
            info["commitLogDiskRatio"] = f"{disk.used / disk.total:.4f}"  # RocketMQ's name: the data disk's use
        except OSError:
            pass  # the data directory is gone (a test tearing down): no figure rather than a failed request
        return info

    def __repr__(self) -> str:
        state = "started" if self.started else "stopped"
        return (
            f"<Broker {self.broker_name} {self.broker_addr} {state} topics={len(self.topics.names())} "
            f"held_pulls={self.holds.held}>"
        )


def _split_addrs(addrs: str | None) -> list[str]:
    return [a.strip() for a in (addrs or "").split(";") if a.strip()]


async def _persisting(what: str, step: Callable[[], object]) -> None:
    """A shutdown step that writes state (plain or async): an OSError (disk full) is logged, and the shutdown
    goes on."""
    try:
        outcome = step()
        if inspect.isawaitable(outcome):
            await outcome
    except OSError as exc:
        log.error("event=shutdown_persist_failed what=%s error=%r", what, exc)
