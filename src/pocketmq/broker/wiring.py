"""The composition root of a broker: the services that stand on its store, built once for its role.

``Broker.__init__`` builds what needs no store (metadata tables, client registries, the breaker board, the name
server client); ``Broker.start`` opens the store and calls ``build_services``, which builds the rest for the
broker's role, each service getting what it needs through its constructor (none is completed by setting its
attributes afterwards, so a service is whole from the moment it exists):

- a master: its store read-write, ``LocalWritePath``, and an ``HaMaster`` that serves its slaves; as a
  SYNC_MASTER, sends and pop acks wait for a slave through that ``HaMaster``; the transaction service, which
  ``Broker.start`` starts;
- a slave: its store read-only (only replication writes it), ``ReadOnlyWritePath``, an ``HaSlave`` that
  follows its master, and its ``ActingRole``: the acting services (the transaction service among them) and the
  election that starts and stops them (it acts only with ``enable_slave_acting_master``, read on every check).

A role does not change while a broker runs: a slave acting as master changes only its write path, through the
one ``WritePathSwitch`` every special service reads (``broker.write_path``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.broker.acting_progress import ActingProgress
from pocketmq.broker.acting_services import ActingServices, ReturningMaster
from pocketmq.broker.config import BrokerConfig, BrokerRole
from pocketmq.broker.ha_metadata import metadata_version
from pocketmq.broker.ha_services import ServiceStateFollower, ServiceTables
from pocketmq.broker.ha_slave import HaSlave
from pocketmq.broker.lite.service import LiteService
from pocketmq.broker.messages import MessageService
from pocketmq.broker.pop.engine import PopService
from pocketmq.broker.pop.fifo import FifoPopState
from pocketmq.broker.pop.setup import build_pop_service
from pocketmq.broker.send_back import SendBackService
from pocketmq.broker.timer.delay import TimerLimits, parse_delay_levels
from pocketmq.broker.timer.recall import RecallHandles
from pocketmq.broker.timer.service import TimerService
from pocketmq.broker.trace_writer import TraceWriter
from pocketmq.broker.tracer import Tracer
from pocketmq.broker.transaction.service import TransactionService
from pocketmq.broker.write_path import LocalWritePath, ReadOnlyWritePath, WritePathSwitch
from pocketmq.cluster.acting_handover import HandoverClient, ProgressOffer
from pocketmq.cluster.acting_master import ActingMasterElection
from pocketmq.cluster.escape import EscapeBridge
from pocketmq.cluster.ha_master import HaMaster
from pocketmq.common.message import Message
from pocketmq.common.topic import revive_topic
from pocketmq.common.trace_record import TRACE_TOPIC
from pocketmq.runtime.files import load_or_create_secret
from pocketmq.store.message_store import MessageStore

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


@dataclass(frozen=True)
class ActingRole:
    """A slave's part in RIP-32: its acting services and the election that runs them."""

    services: ActingServices
    election: ActingMasterElection

    @property
    def acting(self) -> bool:
        return self.election.acting


@dataclass(frozen=True)
class BrokerServices:
    """What a started broker runs on its store (see the module doc)."""

    store: MessageStore
    write_path: WritePathSwitch  # where the timer, revive and the pop engine write
    timer: TimerService  # delayed messages
    messages: MessageService  # send, pull, long polling
    transactions: TransactionService  # half messages, their endings and checks
    send_back: SendBackService  # consumer retries and the DLQ
    pop: PopService
    lite: LiteService  # lite topics: their index, subscriptions and delivery
    tables: ServiceTables  # the service state a master sends its slaves with its metadata
    ha_master: HaMaster | None = None  # a master: serves its slaves
    ha_slave: HaSlave | None = None  # a slave: follows its master
    acting: ActingRole | None = None  # a slave: runs the special services while its master is away
    tracer: Tracer | None = None  # a master: the message trace (docs/trace.md)


def read_only_reason(config: BrokerConfig) -> str | None:
    """Why a slave's store and send path refuse local writes (None: a master)."""
    if not config.is_slave:
        return None
    return f"broker {config.broker_name}/{config.broker_id} is a slave: send to the master of its group"


def build_services(broker: Broker, store: MessageStore) -> BrokerServices:
    """``broker``'s services over ``store`` (opened and recovered), for its role; nothing runs yet."""
    config = broker.config
    fifo = FifoPopState(config.metadata_dir() / "pop_fifo.json")
    ha_master = None if config.is_slave else _ha_master(broker, store, fifo)
    replication = ha_master if config.broker_role is BrokerRole.SYNC_MASTER else None
    reason = read_only_reason(config)
    write_path = WritePathSwitch(
        ReadOnlyWritePath(reason) if reason is not None else LocalWritePath(store, broker.topics, replication)
    )
    timer = TimerService(
        store,
        broker.topics,
        TimerLimits(
            parse_delay_levels(config.message_delay_level), config.timer_max_delay_ms, config.timer_past_tolerance_ms
        ),
        config.metadata_dir() / "timer_progress.json",
        broker.clock,
        write_path=write_path,
        recall_handles=RecallHandles(
            load_or_create_secret(config.metadata_dir() / "recall_secret"), broker_name=broker.broker_name
        ),
        metrics=broker.metrics,
    )
    transactions = TransactionService(
        store,
        broker.topics,
        broker.offsets,
        broker.clock,
        broker_name=broker.broker_name,
        settings=lambda: broker.config.transaction_check_settings(),  # dynamic: read each round and each ending
        reject_half_messages=lambda: broker.config.reject_transaction_message,
        channels=broker.transaction_channels,
        writes=lambda: write_path.current.transaction,  # read on every write: an acting slave's escapes
        read_only_reason=reason,
        metrics=broker.metrics,
    )
    lite = LiteService(
        store, broker.topics, broker.clock, config.lite_settings(), config.metadata_dir() / "lite_offsets.json"
    )
    messages = MessageService(
        store,
        broker.topics,
        broker.groups,
        broker.holds,
        max_body_bytes=config.max_message_bytes,
        max_properties_bytes=config.max_properties_bytes,
        long_polling_enable=config.long_polling_enable,
        short_polling_ms=config.short_polling_ms,
        timer=timer,
        transactions=transactions,
        replication=replication,
        read_only_reason=reason,
        lite=lite,
        traffic=broker.traffic,
    )
    pop = build_pop_service(broker, store, write_path, fifo)
    send_back = SendBackService(store, broker.topics, broker.groups, timer)
    tracer = None if reason is not None else _tracer(broker, messages)
    messages.tracer = pop.tracer = pop.revive.tracer = send_back.tracer = tracer
    tables = ServiceTables(
        stage_offsets=broker.stage_offsets, pop_fifo=fifo, pop_stages=pop.staged.registry, timer=timer, store=store
    )
    ha_slave = acting = None
    if config.is_slave:
        slave: list[HaSlave] = []  # built after the election, which asks it only once started
        acting = _acting_role(
            broker, write_path, timer, pop, transactions, lambda: slave[0].master_answered_ms if slave else None
        )
        ha_slave = _ha_slave(broker, store, tables, acting, timer)
        slave.append(ha_slave)
    return BrokerServices(
        store=store,
        write_path=write_path,
        timer=timer,
        messages=messages,
        transactions=transactions,
        send_back=send_back,
        pop=pop,
        lite=lite,
        tables=tables,
        ha_master=ha_master,
        ha_slave=ha_slave,
        acting=acting,
        tracer=tracer,
    )


def _tracer(broker: Broker, messages: MessageService) -> Tracer:
    def send(batch: list[Message]):
        return messages.send(batch, topic=TRACE_TOPIC, system_topic=TRACE_TOPIC)

    writer = TraceWriter(send, capacity=broker.config.trace_queue_capacity, metrics=broker.metrics)
    return Tracer(
        writer,
        broker_name=broker.broker_name,
        clock=broker.clock,
        settings=lambda: (broker.config.trace_enabled, broker.config.trace_sample_ratio),
    )


def returning_master(broker: Broker, services: BrokerServices) -> ReturningMaster:
    """What a master starting with ``enable_slave_acting_master`` takes its slaves' acting progress into."""
    return ReturningMaster(
        broker_name=broker.broker_name,
        revive_topic=revive_topic(broker.config.cluster_name),
        store=services.store,
        offsets=broker.offsets,
        pop=services.pop,
        namesrv=broker.namesrv_client(),
        slaves=HandoverClient(broker.remoting_client, broker_name=broker.broker_name, master_addr=broker.broker_addr),
    )


def _ha_master(broker: Broker, store: MessageStore, fifo: FifoPopState) -> HaMaster:
    config, boot_timestamp_ms = broker.config, broker.boot_timestamp_ms
    auth = broker.access.table
    ha_master = HaMaster(
        store,
        clock=broker.clock,
        ack_timeout_ms=config.ha_slave_ack_timeout_ms,
        max_gap_bytes=config.ha_max_gap_bytes,
        slave_expire_ms=config.ha_slave_expire_ms,
        metrics=broker.metrics,
        epochs=broker.epochs,
        fence=broker.epoch_fence,
        # What a slave must have applied to hold this master's topics, groups, FIFO POP acks and users.
        metadata_version=lambda: metadata_version(
            boot_timestamp_ms, broker.topics, broker.groups, fifo.data_version, auth.version
        ),
    )
    auth.add_listener(ha_master.metadata_changed)  # a user or ACL change writes no record: wake the slaves
    return ha_master


def _acting_role(
    broker: Broker,
    write_path: WritePathSwitch,
    timer: TimerService,
    pop: PopService,
    transactions: TransactionService,
    master_answered_ms: Callable[[], float | None],
) -> ActingRole:
    config = broker.config
    progress = ActingProgress(config.metadata_dir() / "acting_master.json")
    progress.load()
    bridge = EscapeBridge(
        broker.namesrv_client(),
        broker.remoting_client,
        cluster_name=config.cluster_name,
        broker_name=broker.broker_name,
        store_host=broker.broker_addr,
        enabled=lambda: broker.config.enable_remote_escape,  # dynamic: read on every write
        metrics=broker.metrics,
        clock=broker.clock,
    )
    services = ActingServices(
        bridge=bridge,
        progress=progress,
        revive_topic=revive_topic(config.cluster_name),
        write_path=write_path,
        read_only=write_path.current,
        timer=timer,
        pop=pop,
        transactions=transactions,
        offsets=broker.offsets,
        persist_interval_ms=config.pop_state_persist_interval_ms,
        periodic=broker.periodic,
        master=ProgressOffer(
            broker.remoting_client,
            broker_name=broker.broker_name,
            broker_id=config.broker_id,
            slave_addr=broker.broker_addr,
        ),
    )
    election = ActingMasterElection(
        broker.namesrv_client(),
        services,
        broker.clock,
        cluster_name=config.cluster_name,
        broker_name=broker.broker_name,
        broker_id=config.broker_id,
        enabled=lambda: broker.config.enable_slave_acting_master,  # dynamic: read on every check
        check_interval_ms=config.ha_master_lookup_interval_ms,
        absence_confirm_ms=config.register_interval_ms,  # a live master registers again within it
        master_answered_ms=master_answered_ms,
        metrics=broker.metrics,
    )
    return ActingRole(services, election)


def _ha_slave(
    broker: Broker, store: MessageStore, tables: ServiceTables, acting: ActingRole, timer: TimerService
) -> HaSlave:
    config = broker.config
    return HaSlave(
        store,
        broker.topics,
        broker.groups,
        broker.offsets,
        broker.namesrv_client(),
        broker.remoting_client,
        auth=broker.access.table,
        cluster_name=config.cluster_name,
        broker_name=broker.broker_name,
        broker_id=config.broker_id,
        slave_addr=broker.broker_addr,
        transfer_max_bytes=config.ha_transfer_max_bytes,
        pull_suspend_ms=config.ha_pull_suspend_ms,
        lookup_interval_ms=config.ha_master_lookup_interval_ms,
        services=ServiceStateFollower(tables, lambda: acting.acting),
        epochs=broker.epochs,
        after_cut=timer.after_cut,
        clock=broker.clock,
        fence=broker.epoch_fence,
    )
