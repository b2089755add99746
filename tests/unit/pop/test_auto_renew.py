"""Auto-renewed invisibility of push consumers (gRPC ``auto_renew`` receives) in virtual time.

A message received with auto renew stays invisible while its client's session lives, however long the
listener takes, and the client's first receipt handle keeps working for ack and nack; once the client is
gone the message comes back after its deadline.
"""

from __future__ import annotations

import asyncio
import dataclasses

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.broker.pop.renewal import RenewalTable
from pocketmq.broker.write_path import LocalWritePath
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.runtime.clock import ManualClock
from pocketmq.server.auto_renew import AutoRenewer
from pocketmq.server.grpc_consumer import ConsumerRpcs
from pocketmq.server.sessions import SessionRegistry
from pocketmq.store.api import PutStatus

GROUP, TOPIC = "G", "T"


def sessions_of(*client_ids: str) -> SessionRegistry:
    sessions = SessionRegistry()
    for client_id in client_ids:
        sessions.heartbeat(client_id, 0)
    return sessions


def receive_request(batch: int = 32) -> spb.ReceiveMessageRequest:
    req = spb.ReceiveMessageRequest(group=pb.Resource(name=GROUP), batch_size=batch, auto_renew=True)
    req.message_queue.topic.name = TOPIC
    req.message_queue.id = -1
    req.filter_expression.type = pb.TAG
    req.filter_expression.expression = "*"
    req.long_polling_timeout.seconds = 0
    return req


async def receive(rpcs: ConsumerRpcs, client_id: str) -> list[str]:
    """The receipt handles of one auto-renew receive."""
    return [
        r.message.system_properties.receipt_handle
        async for r in rpcs.receive(receive_request(), None, client_id)
        if r.WhichOneof("content") == "message"
    ]


def ack_request(handle: str) -> spb.AckMessageRequest:
    return spb.AckMessageRequest(
        group=pb.Resource(name=GROUP),
        topic=pb.Resource(name=TOPIC),
        entries=[spb.AckMessageEntry(message_id="x", receipt_handle=handle)],
    )


async def test_renewed_while_the_client_lives_and_the_first_handle_acks(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, TOPIC, 3)
        alive = sessions_of("c1")
        rpcs = ConsumerRpcs(broker, alive, RenewalTable(invisible_ms=60_000, ahead_ms=10_000))
        handles = await receive(rpcs, "c1")
        assert len(handles) == 3 and len(rpcs.renewals) == 3
        for _ in range(10):  # ten minutes of a slow listener, checked every 5 s
            for _ in range(12):
                clock.advance(5_000)
                await rpcs.renewer.renew_due()
                await broker.pop.revive.run_once(clock.now_ms())
            assert await pop(broker, GROUP, TOPIC) == []  # nothing came back
        reply = await rpcs.ack(ack_request(handles[0]), None)
        assert [e.status.code for e in reply.entries] == [V2StatusCode.OK]
        nack = spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name=GROUP), topic=pb.Resource(name=TOPIC), receipt_handle=handles[1], message_id="x"
        )
        nack.invisible_duration.seconds = 1
        reply = await rpcs.change_invisible(nack, None)
        assert reply.status.code == V2StatusCode.OK
        assert len(rpcs.renewals) == 1  # acked and nacked messages are no longer renewed
        clock.advance(1_001)
        await broker.pop.revive.run_once(clock.now_ms())
        again = await pop(broker, GROUP, TOPIC)
        assert [m.body for m, _ in again] == [b"m1"] and again[0][0].reconsume_times == 1
        assert await broker.pop.ack(GROUP, [again[0][1]]) == [None]
        # The client goes away: its last message is not renewed any more and comes back after its deadline.
        alive.remove("c1")
        clock.advance(60_000)
        await rpcs.renewer.renew_due()
        assert len(rpcs.renewals) == 0
        await broker.pop.revive.run_once(clock.now_ms())
        assert [m.body for m, _ in await pop(broker, GROUP, TOPIC)] == [b"m2"]


async def test_renewal_stops_after_max_renew(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, TOPIC, 1)
        rpcs = ConsumerRpcs(broker, None, RenewalTable(invisible_ms=60_000, ahead_ms=10_000, max_renew_ms=120_000))
        [handle] = await receive(rpcs, "c1")
        for _ in range(60):
            clock.advance(5_000)
            await rpcs.renewer.renew_due()
            await broker.pop.revive.run_once(clock.now_ms())
        assert len(rpcs.renewals) == 0
        [(msg, _)] = await pop(broker, GROUP, TOPIC)
        assert msg.reconsume_times == 1
        reply = await rpcs.ack(ack_request(handle), None)  # revived already: the first handle is stale
        assert [e.status.code for e in reply.entries] == [V2StatusCode.INVALID_RECEIPT_HANDLE]


class SlaveAway:
    """A SYNC master's replication while its slave is away (HaMaster.replicated's answer then)."""

    async def replicated(self, results):
        return [dataclasses.replace(r, status=PutStatus.SLAVE_NOT_AVAILABLE) for r in results]


async def test_renewal_goes_on_while_a_sync_master_s_slave_is_away(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, TOPIC, 1)
        rpcs = ConsumerRpcs(broker, sessions_of("c1"), RenewalTable(invisible_ms=60_000, ahead_ms=10_000))
        [handle] = await receive(rpcs, "c1")
        broker.write_path.use(LocalWritePath(broker.store, broker.topics, SlaveAway()))
        for _ in range(24):  # two minutes: renewed on the master each time, though not on a slave
            clock.advance(5_000)
            await rpcs.renewer.renew_due()
            await broker.pop.revive.run_once(clock.now_ms())
        assert len(rpcs.renewals) == 1 and await pop(broker, GROUP, TOPIC) == []
        broker.write_path.use(LocalWritePath(broker.store, broker.topics))  # the slave is back
        reply = await rpcs.ack(ack_request(handle), None)  # the first handle still acks (the current one)
        assert [e.status.code for e in reply.entries] == [V2StatusCode.OK]


async def test_a_goodbye_ends_the_clients_long_poll_first_and_pops_nothing_for_it(tmp_path):
    """The official Python client closes its channel right after NotifyClientTermination answers: a receive still
    open then is cancelled on its side and logged as an error. Its long poll ends at once, before the goodbye
    answers, and nothing arriving later is popped for a client that left."""
    async with running_broker(tmp_path) as broker:
        await send(broker, TOPIC, 0)
        sessions = sessions_of("c1")
        rpcs = ConsumerRpcs(broker, sessions, RenewalTable(invisible_ms=60_000, ahead_ms=10_000))
        request = receive_request()
        request.long_polling_timeout.seconds = 20
        responses = asyncio.ensure_future(collect(rpcs.receive(request, None, "c1")))
        async with asyncio.timeout(5):
            while broker.pop._waiters.waiting == 0:
                await asyncio.sleep(0.01)
            session = sessions.remove("c1")
            await session.receives_closed(timeout_s=5)
            assert responses.done() and not session.open_receives
            statuses = [r.status.code for r in responses.result() if r.WhichOneof("content") == "status"]
            assert statuses == [V2StatusCode.MESSAGE_NOT_FOUND]
        await send(broker, TOPIC, 1)
        assert len(await pop(broker, GROUP, TOPIC)) == 1  # still there for the clients that stay


async def collect(stream) -> list:
    return [response async for response in stream]


async def test_a_message_acked_while_an_earlier_one_is_renewed_is_not_renewed_after_its_ack():
    """The round lists what is due, then renews one by one across awaits: a message acked meanwhile (its
    renewal taken by the ack) must not be changed under the ack, which would make the ack's handle stale."""
    clock = ManualClock()
    changed: list[str] = []
    release = asyncio.Event()

    async def change(group: str, handle: ReceiptHandle, invisible_ms: int) -> ReceiptHandle:
        changed.append(handle.topic)
        if handle.topic == "A":
            await release.wait()
        return dataclasses.replace(handle, pop_time_ms=clock.now_ms(), invisible_time_ms=invisible_ms)

    renewer = AutoRenewer(RenewalTable(invisible_ms=60_000, ahead_ms=10_000), change, None, clock=clock)
    for topic in ("A", "B"):
        handle = ReceiptHandle(topic, 0, 0, 60_000, 0, 0, "b", 0, 0, 0)
        renewer.track(handle.encode(), "c1", GROUP, handle)
    clock.advance(55_000)
    renewing = asyncio.ensure_future(renewer.renew_due())
    await asyncio.sleep(0)
    assert changed == ["A"]
    b_text = ReceiptHandle("B", 0, 0, 60_000, 0, 0, "b", 0, 0, 0).encode()
    assert (await renewer.current_handle(b_text, GROUP, "B")).topic == "B"  # the ack takes B's renewal
    release.set()
    assert await renewing == 1
    assert changed == ["A"]  # B was not changed after its ack took it


async def test_the_embedded_front_end_refuses_a_handle_of_another_topic_than_the_request(tmp_path):
    """Rights are checked on the request's topic: an ack, change or forward naming another topic's message is
    INVALID_RECEIPT_HANDLE and leaves that message as it was."""
    async with running_broker(tmp_path) as broker:
        await send(broker, "Secret", 1)
        rpcs = ConsumerRpcs(broker, sessions_of("c1"))
        secret_req = receive_request()
        secret_req.message_queue.topic.name = "Secret"
        [handle] = [
            r.message.system_properties.receipt_handle
            async for r in rpcs.receive(secret_req, None, "c1")
            if r.WhichOneof("content") == "message"
        ]
        reply = await rpcs.ack(ack_request(handle), None)  # on TOPIC, with Secret's handle
        assert [e.status.code for e in reply.entries] == [V2StatusCode.INVALID_RECEIPT_HANDLE]
        change = spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name=GROUP), topic=pb.Resource(name=TOPIC), receipt_handle=handle, message_id="x"
        )
        change.invisible_duration.seconds = 0
        assert (await rpcs.change_invisible(change, None)).status.code == V2StatusCode.INVALID_RECEIPT_HANDLE
        forward = spb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name=GROUP), topic=pb.Resource(name=TOPIC), receipt_handle=handle, message_id="x"
        )
        assert (await rpcs.forward_to_dead_letter(forward, None)).status.code == V2StatusCode.INVALID_RECEIPT_HANDLE
        own = ack_request(handle)
        own.topic.name = "Secret"
        assert [e.status.code for e in (await rpcs.ack(own, None)).entries] == [V2StatusCode.OK]  # still in flight
