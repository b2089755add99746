"""Which producer a transaction check goes to: the live producers of the half message's producer group, over
whichever front end they came by.

Each front end adds a *source*: ``source(group) -> channels`` (the remoting port: the connections that named the
group in a HEART_BEAT; the gRPC port: the Telemetry streams of producers that publish a topic of that name, the
group a v2 half message carries). A channel pushes one ``HalfCheck`` to its client, oneway.

``ProducerChannels.pick`` is RocketMQ's ``ProducerManager.getAvailableChannel``: one broker-wide counter,
``++counter % n`` over the group's channels, the first writable one within 3 tries, else the last one still
open, else none. So any producer of the group may be asked, not necessarily the one that sent the message.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pocketmq.common.message import MessageExt

_TRIES = 3


@dataclass(frozen=True, slots=True)
class HalfCheck:
    """One check: the half record as stored (its offsets are what the answer must name) and this broker's name."""

    half: MessageExt
    transaction_id: str
    broker_name: str


class CheckChannel(Protocol):
    @property
    def is_open(self) -> bool: ...

    @property
    def writable(self) -> bool: ...

    def send_check(self, check: HalfCheck) -> bool:
        """Push ``check`` to the client; False when it could not be handed over (closed, outbox full)."""


ChannelSource = Callable[[str], list[CheckChannel]]


class ProducerChannels:
    def __init__(self) -> None:
        self._sources: list[ChannelSource] = []
        self._counter = itertools.count(1)

    def add_source(self, source: ChannelSource) -> None:
        self._sources.append(source)

    def channels(self, group: str) -> list[CheckChannel]:
        return [channel for source in self._sources for channel in source(group)]

    def pick(self, group: str) -> CheckChannel | None:
        candidates = self.channels(group)
        if not candidates:
            return None
        start = next(self._counter)
        last_open = None
        for step in range(min(_TRIES, len(candidates))):
            channel = candidates[(start + step) % len(candidates)]
            if channel.is_open and channel.writable:
                return channel
            if channel.is_open:
                last_open = channel
        return last_open or next((c for c in candidates if c.is_open), None)

    def __repr__(self) -> str:
        return f"<ProducerChannels sources={len(self._sources)}>"
