"""Client models: a producer of SYNC sends and POP consumers. They record what they saw (sends answered OK,
deliveries, acks answered OK) in the trace; the checkers hold the system to that."""

from __future__ import annotations

from pocketmq.common import properties as props
from pocketmq.common.errors import RemotingError
from pocketmq.common.message import MessageExt
from pocketmq.testing.sim.config import GROUPS, QUEUES_PER_GROUP, RETRY_TOPIC, TOPIC
from pocketmq.testing.sim.nodes import Node
from pocketmq.testing.sim.wire import Ack, Pop, Send


class _Client(Node):
    """A client process: it serves nothing, refreshes its view every heartbeat and runs its ``work`` loop."""

    def start(self) -> None:
        self.incarnation += 1
        self.up = True
        self.net.attach(self.addr, lambda src, request, respond: None)
        self.kernel.spawn(self._view_loop(self.incarnation))
        self.kernel.spawn(self.work(self.incarnation))

    async def _view_loop(self, inc: int) -> None:
        while self.alive(inc):
            await self.refresh_view(inc)
            await self.kernel.sleep(self.config.heartbeat_ms)

    async def work(self, inc: int) -> None:
        raise NotImplementedError


class SimProducer(_Client):
    def __init__(self, *args):
        super().__init__("producer", *args)
        self.sending = True
        self._sent = 0

    async def work(self, inc: int) -> None:
        rng = self.kernel.rng
        while self.alive(inc):
            await self.kernel.sleep(rng.randint(*self.config.send_interval_ms))
            writable = [(g, addr) for g in GROUPS if (addr := self.master_addr(g)) is not None]
            if not self.sending or not writable:
                continue
            group, master_addr = rng.choice(writable)
            self._sent += 1
            origin = f"m{self._sent}"
            msg = MessageExt(
                topic=TOPIC,
                body=origin.encode(),
                properties={props.UNIQ_KEY: origin},
                queue_id=rng.randrange(QUEUES_PER_GROUP),
            )
            self.kernel.spawn(self._send(group, master_addr, msg))

    async def _send(self, group: str, master_addr: str, msg: MessageExt) -> None:
        try:
            reply = await self.net.call(self.addr, master_addr, Send(msg), self.config.send_timeout_ms)
        except RemotingError as exc:
            self.history.record("send_failed", origin=msg.uniq_key, group=group, status=type(exc).__name__)
            return
        if reply.status == "SEND_OK":
            self.history.record(
                "send_ok", origin=msg.uniq_key, group=group, queue_id=msg.queue_id, queue_offset=reply.queue_offset
            )
        else:
            self.history.record("send_failed", origin=msg.uniq_key, group=group, status=reply.status)


class SimConsumer(_Client):
    def __init__(self, name: str, *args):
        super().__init__(name, *args)
        self.ack_probability = self.config.ack_probability

    async def work(self, inc: int) -> None:
        rng = self.kernel.rng
        targets = [(g, TOPIC, q) for g in GROUPS for q in range(QUEUES_PER_GROUP)] + [
            (g, RETRY_TOPIC, 0) for g in GROUPS
        ]
        while self.alive(inc):
            await self.kernel.sleep(rng.randint(*self.config.pop_interval_ms))
            group, topic, queue_id = rng.choice(targets)
            addr = self.serving_addr(group)
            if addr is None:
                continue
            request = Pop(topic, queue_id, self.config.pop_batch, self.config.invisible_ms)
            try:
                reply = await self.net.call(self.addr, addr, request, self.config.rpc_timeout_ms)
            except RemotingError:
                continue
            if reply.error or not reply.messages:
                continue
            for msg in reply.messages:
                self.history.record(
                    "delivered",
                    consumer=self.addr,
                    origin=msg.uniq_key,
                    location=(reply.checkpoint.broker_name, msg.topic, msg.queue_id, msg.queue_offset),
                    reconsume_times=msg.reconsume_times,
                )
                if rng.random() < self.ack_probability:
                    self.kernel.spawn(
                        self._ack(
                            reply.checkpoint, reply.ck_store_group, msg, rng.randint(5, self.config.invisible_ms // 2)
                        )
                    )

    async def _ack(self, ck, ck_store_group: str, msg: MessageExt, after_ms: int) -> None:
        await self.kernel.sleep(after_ms)
        addr = self.master_addr(ck_store_group)
        if addr is None:
            return  # nowhere to ack: the message comes back after its invisible time
        ack = ck.ack_of((msg.queue_offset,))
        try:
            reply = await self.net.call(self.addr, addr, Ack(ack), self.config.rpc_timeout_ms)
        except RemotingError:
            return
        if reply.ok:
            self.history.record(
                "acked",
                consumer=self.addr,
                origin=msg.uniq_key,
                location=(ck.broker_name, ck.topic, ck.queue_id, msg.queue_offset),
            )
