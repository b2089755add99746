"""A broker group's master lease, epoch and in-sync set in etcd (``serve --controller etcd://HOST:PORT,...``).

etcd does the one thing that needs consensus: who is master of a group, and since which epoch. Keys, per
group, under ``/pocketmq/<cluster>/<broker name>/``:

- ``epoch``: the last epoch granted, a decimal counter (no lease: it survives every broker).
- ``master``: ``{"brokerId": N, "epoch": E, "address": "HOST:PORT"}``, attached to the holder's lease, so it
  goes when the holder stops renewing it. A campaign is one transaction: *no ``master`` key and ``epoch`` is
  still E-1* then put ``epoch`` = E and ``master``; so each tenure has its own number, and two brokers
  campaigning for the same epoch cannot both win.
- ``in_sync``: ``{"epoch": E, "brokerIds": [...]}``, written by the master of E only (the transaction checks
  its ``master`` value): the brokers that hold every record it confirmed. Only they may take over.
- ``candidates/<broker id>``: ``{"logEnd": P, "address": "HOST:PORT"}`` on each live broker's lease.

Each broker has one lease (``lease_ttl_ms``, 2 s by default, whole seconds in etcd) that it renews three times
per TTL; a ``LeaseTimer`` (``cluster/election.py``) says until when a master may still write. A watch on the
group's prefix sets ``changed`` whenever a key of the group changes, so followers react at once.

Endpoints: ``etcd://H1:P1,H2:P2,H3:P3`` names the members of one etcd cluster. The controller talks to one at a
time and moves to the next when a request to it fails or is not answered in time; the next request goes there.
A keep-alive is retried on the next endpoint at once, and waits at most ``LeaseTimer.keepalive_timeout_ms``, so
one silent member does not cost a master its lease (the timing rules are ``cluster/election.py``'s).

Uses the ``aetcd`` client (asyncio, over etcd's gRPC API; it needs only grpcio and protobuf, which PocketMQ
already depends on).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import operator
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pocketmq.cluster.election import DEFAULT_LEASE_MARGIN_MS, DEFAULT_LEASE_TTL_MS, Candidate, GroupState, LeaseTimer
from pocketmq.common.errors import PocketMQError
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

SCHEME = "etcd://"
REQUEST_TIMEOUT_S = 1.0  # one etcd request (a master's also ends when its lease stops holding)
RETRY_PAUSE_MS = 50  # between keep-alives that failed at once (connection refused), not to spin


class ControllerError(PocketMQError):
    """etcd did not answer, or answered what the controller cannot use."""


def parse_endpoints(controller: str) -> tuple[tuple[str, int], ...]:
    """``etcd://HOST:PORT[,HOST:PORT...]`` as ((host, port), ...); ValueError otherwise."""
    expected = f"controller {controller!r}: expected {SCHEME}HOST:PORT[,HOST:PORT...]"
    if not controller.startswith(SCHEME):
        raise ValueError(expected)
    endpoints = []
    for endpoint in controller[len(SCHEME) :].rstrip("/").split(","):
        host, sep, port = endpoint.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(expected)
        endpoints.append((host, int(port)))
    return tuple(endpoints)


@dataclass(frozen=True, slots=True)
class GroupView:
    """One read of the group's keys."""

    state: GroupState
    candidates: tuple[Candidate, ...]
    addresses: dict[int, str]  # broker id -> remoting address, of the holder and the candidates
    in_sync_epoch: int  # the epoch whose master wrote ``state.in_sync_ids`` (0: none written)
    holder_lease_id: int  # the lease the ``master`` key is attached to (0: no holder)


def group_view(kvs: dict[str, bytes], holder_lease_id: int = 0) -> GroupView:
    """The view from the group's keys (relative names: ``epoch``, ``master``, ``candidates/1``...)."""
    epoch = int(kvs.get("epoch", b"0") or 0)
    holder_id: int | None = None
    addresses: dict[int, str] = {}
    candidates = []
    for name, value in sorted(kvs.items()):
        if name.startswith("candidates/"):
            obj = json.loads(value)
            broker_id = int(name.split("/", 1)[1])
            candidates.append(Candidate(broker_id, int(obj["logEnd"])))
            addresses[broker_id] = str(obj["address"])
    if "master" in kvs:
        master = json.loads(kvs["master"])
        holder_id = int(master["brokerId"])
        addresses[holder_id] = str(master["address"])
    in_sync = json.loads(kvs.get("in_sync", b'{"epoch": 0, "brokerIds": []}'))
    state = GroupState(epoch, holder_id, frozenset(int(i) for i in in_sync["brokerIds"]))
    return GroupView(state, tuple(candidates), addresses, int(in_sync["epoch"]), holder_lease_id)


class EtcdController:
    def __init__(
        self,
        endpoint: str,
        *,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        address: str,
        clock: Clock = SYSTEM_CLOCK,
        lease_ttl_ms: int = DEFAULT_LEASE_TTL_MS,
        lease_margin_ms: int = DEFAULT_LEASE_MARGIN_MS,
    ):
        self._endpoints = parse_endpoints(endpoint)
        self._current = 0  # the index of the endpoint requests go to
        self.endpoint = endpoint
        self.broker_id = broker_id
        self.address = address
        self.prefix = f"/pocketmq/{cluster_name}/{broker_name}/"
        # etcd counts TTLs in whole seconds
        self.lease = LeaseTimer(clock, 1000 * max(1, math.ceil(lease_ttl_ms / 1000)), lease_margin_ms)
        self.changed = asyncio.Event()
        self._client: Any = None
        self._lease_id: int | None = None
        self._log_end = 0  # the last log end this broker told of
        self._published_log_end: int | None = None  # the log end etcd holds on the current lease (None: none)
        self._master_value: bytes | None = None
        self._tasks: list[asyncio.Task] = []
        self._closing: set[asyncio.Task] = set()  # clients of endpoints left behind, being closed
        self._stopping = False

    @property
    def lease_id(self) -> int | None:
        return self._lease_id

    def _key(self, name: str) -> bytes:
        return (self.prefix + name).encode()

    @property
    def current_endpoint(self) -> str:
        host, port = self._endpoints[self._current]
        return f"{host}:{port}"

    def _connect(self) -> None:
        import aetcd  # here, so a broker without --controller never imports the client

        host, port = self._endpoints[self._current]
        self._client = aetcd.Client(host=host, port=port)

    def _next_endpoint(self, failed_client: Any) -> None:
        """Requests go to the next endpoint, unless another failed request already moved them on."""
        if len(self._endpoints) == 1 or self._client is not failed_client:
            return
        failed = self.current_endpoint
        self._current = (self._current + 1) % len(self._endpoints)
        self._connect()
        closing = asyncio.create_task(self._close_later(failed_client), name="controller-close-endpoint")
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)
        if self._tasks:  # the watch moves too: one on a member that lost the others would stay silent
            self._tasks[1].cancel()
            self._tasks[1] = asyncio.create_task(self._watch(), name="controller-watch")
        log.warning(
            "event=controller_endpoint broker_id=%d failed=%s next=%s", self.broker_id, failed, self.current_endpoint
        )

    async def _close_later(self, client: Any) -> None:
        """Close a client left behind once the requests still waiting on it have timed out: closing its channel
        would cancel them, and a cancellation would end the task that waits, not only the request."""
        try:
            await asyncio.sleep(REQUEST_TIMEOUT_S + self.lease.keepalive_timeout_ms / 1000)
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    async def _call(self, request: Callable[[Any], Awaitable[Any]], timeout_s: float | None = None):
        """``request(client)`` on the current endpoint; on no answer in time, or an error, the next requests go
        to the next endpoint. While the lease holds, no request outlasts it: a master that cannot reach etcd
        steps down as its lease ends, not when a request to a silent member gives up."""
        if timeout_s is None:
            timeout_s = REQUEST_TIMEOUT_S
            if self.lease.holds():
                timeout_s = min(timeout_s, self.lease.remaining_ms() / 1000)
        client, endpoint = self._client, self.current_endpoint
        try:
            return await asyncio.wait_for(request(client), timeout_s)
        except TimeoutError as exc:
            self._next_endpoint(client)
            raise ControllerError(f"etcd at {endpoint} did not answer within {timeout_s:.3f}s") from exc
        except Exception as exc:  # aetcd raises its own ClientError family over grpc's errors
            if self._stopping:
                raise ControllerError(f"etcd at {endpoint}: stopping") from exc
            self._next_endpoint(client)
            raise ControllerError(f"etcd at {endpoint}: {exc!r}") from exc

    async def start(self) -> None:
        """Connect and take a lease, trying each endpoint once."""
        self._connect()
        for attempt in range(len(self._endpoints)):
            try:
                await self._new_lease()
                break
            except ControllerError:
                if attempt == len(self._endpoints) - 1:
                    raise
        self._tasks = [
            asyncio.create_task(self._keep_alive(), name="controller-keepalive"),
            asyncio.create_task(self._watch(), name="controller-watch"),
        ]

    async def stop(self) -> None:
        """Cancel the renewals and the watch and revoke the lease, so the others need not wait for it to lapse."""
        self._stopping = True  # the client may turn a cancellation into an error: the tasks check this too
        tasks = [*self._tasks, *self._closing]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        if self._lease_id is not None:
            lease_id = self._lease_id
            with contextlib.suppress(ControllerError):
                await self._call(lambda c: c.revoke_lease(lease_id))
        self.lease.lost()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()

    async def _new_lease(self) -> None:
        sent_ms = self.lease.sent()
        granted = await self._call(lambda c: c.lease(self.lease.ttl_ms // 1000))
        self._lease_id = granted.id
        self.lease.renewed(sent_ms, 1000 * granted.ttl)
        self._published_log_end = None  # the candidacy went with the old lease
        await self.publish_log_end(self._log_end)

    async def _keep_alive(self) -> None:
        failing = False
        while not self._stopping:
            # after a failure, at once on the next endpoint: a renewal must reach etcd before the lease stops holding
            await asyncio.sleep((RETRY_PAUSE_MS if failing else self.lease.keepalive_interval_ms) / 1000)
            try:
                sent_ms = self.lease.sent()
                lease_id = self._lease_id
                refresh = operator.methodcaller("refresh_lease", lease_id)
                reply = await self._call(refresh, self.lease.keepalive_timeout_ms / 1000)
                if lease_id != self._lease_id:
                    continue  # replaced meanwhile (``resign``): this answer is about a lease given up
                if reply is None or reply.TTL <= 0:
                    # the lease is gone in etcd (it lapsed while we could not reach it): a new one, no mastership
                    log.warning("event=controller_lease_lost broker_id=%d lease_id=%s", self.broker_id, self._lease_id)
                    self.lease.lost()
                    self._master_value = None
                    self.changed.set()
                    await self._new_lease()
                else:
                    self.lease.renewed(sent_ms, 1000 * reply.TTL)
                if failing:
                    log.warning(
                        "event=controller_reachable broker_id=%d endpoint=%s", self.broker_id, self.current_endpoint
                    )
                failing = False
            except ControllerError as exc:
                if not failing:
                    log.warning("event=controller_unreachable broker_id=%d error=%s", self.broker_id, exc)
                failing = True
                self.changed.set()  # the loop checks whether the lease still holds

    async def _watch(self) -> None:
        while not self._stopping:
            try:
                watch = await self._call(lambda c: c.watch_prefix(self.prefix.encode()))
                self.changed.set()  # anything may have changed while no watch ran
                async for _event in watch:
                    self.changed.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the stream broke (etcd restarted, network): watch again shortly
                log.debug("event=controller_watch_broken error=%r", exc)
            await asyncio.sleep(self.lease.keepalive_interval_ms / 1000)

    async def read(self) -> GroupView:
        found = await self._call(lambda c: c.get_prefix(self.prefix.encode()))
        kvs = {kv.key.decode()[len(self.prefix) :]: kv.value for kv in found}
        holder_lease_id = next((kv.lease for kv in found if kv.key == self._key("master")), 0)
        try:
            return group_view(kvs, holder_lease_id)
        except (ValueError, KeyError, TypeError) as exc:
            raise ControllerError(f"group keys under {self.prefix} do not parse: {exc!r}") from exc

    async def publish_log_end(self, log_end: int) -> None:
        """Candidacy: this broker is up, its log ends at ``log_end`` (written unless etcd holds it already on
        this lease: a put that failed is tried again at the next call)."""
        self._log_end = log_end
        if log_end == self._published_log_end:
            return
        value = json.dumps({"logEnd": log_end, "address": self.address}).encode()
        key, lease_id = self._key(f"candidates/{self.broker_id}"), self._lease_id
        await self._call(lambda c: c.put(key, value, lease=lease_id))
        if lease_id == self._lease_id:  # not a put on a lease replaced meanwhile
            self._published_log_end = log_end

    async def campaign(self, epoch: int) -> bool:
        """Take the master lease as epoch ``epoch`` if nobody holds it and the last epoch is ``epoch - 1``."""
        tx = self._client.transactions
        last = tx.version(self._key("epoch")) == 0 if epoch == 1 else tx.value(self._key("epoch")) == str(epoch - 1)
        value = json.dumps({"brokerId": self.broker_id, "epoch": epoch, "address": self.address}).encode()
        compare = [tx.version(self._key("master")) == 0, last]
        success = [
            tx.put(self._key("epoch"), str(epoch).encode()),
            tx.put(self._key("master"), value, lease=self._lease_id),
        ]
        won, _ = await self._call(lambda c: c.transaction(compare=compare, success=success, failure=[]))
        if won:
            self._master_value = value
            log.warning("event=controller_won broker_id=%d epoch=%d group=%s", self.broker_id, epoch, self.prefix)
        return bool(won)

    async def publish_in_sync(self, epoch: int, broker_ids: frozenset[int]) -> bool:
        """The master of ``epoch`` writes its in-sync set; False when it no longer holds the lease."""
        if self._master_value is None:
            return False
        tx = self._client.transactions
        value = json.dumps({"epoch": epoch, "brokerIds": sorted(broker_ids)}).encode()
        compare = [tx.value(self._key("master")) == self._master_value]
        success = [tx.put(self._key("in_sync"), value)]
        done, _ = await self._call(lambda c: c.transaction(compare=compare, success=success, failure=[]))
        return bool(done)

    async def resign(self) -> None:
        """Give the lease up (a master stepping down while etcd still answers): a new lease, without the
        ``master`` key, so another broker need not wait for the old lease to lapse."""
        self._master_value = None
        self.lease.lost()
        old = self._lease_id
        with contextlib.suppress(ControllerError):
            await self._call(lambda c: c.revoke_lease(old))
        await self._new_lease()

    def __repr__(self) -> str:
        return f"<EtcdController {self.prefix}{self.broker_id} endpoint={self.current_endpoint} lease={self._lease_id}>"
