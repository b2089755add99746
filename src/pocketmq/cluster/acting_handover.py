"""The calls of a master taking its special services back from the slaves of its group (docs/ha.md).

``broker.acting_services.take_services_back`` runs the handover; this is its port to the other brokers, so the
broker layer sees progress bodies and versions, not request codes and response frames:

- ``take_progress``: ACTING_MASTER_HANDOVER (PocketMQ 30110); the slave stops acting and answers its acting
  progress (``broker.acting_progress`` snapshot);
- ``progress_applied``: ACTING_PROGRESS_APPLIED (30111) with the snapshot's version; the slave forgets what the
  master applied;
- ``ProgressOffer.offer`` (the slave's one call): ACTING_PROGRESS_OFFER (30113) to a master that came back
  without restarting (it was frozen or cut off, so it never asked): the master runs the handover with this
  slave and answers once it has taken the progress.

A failure is ``RemoteServerError`` (the slave answered with an error) or ``RemotingError`` (no answer).
"""

from __future__ import annotations

from pocketmq.protocol.codes import ACTING_MASTER_HANDOVER, ACTING_PROGRESS_APPLIED, ACTING_PROGRESS_OFFER
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import (
    ActingProgressAppliedRequestHeader,
    ActingProgressOfferRequestHeader,
    BrokerNameRequestHeader,
)
from pocketmq.protocol.transport import RemotingClient

HANDOVER_TIMEOUT_S = 5.0
# The master answers an offer after its handover with the slave, which asks a slave that does not answer in time
# again (three times in all: broker.acting_services.HANDOVER_ATTEMPTS), so an offer waits longer than those.
OFFER_TIMEOUT_S = 4 * HANDOVER_TIMEOUT_S


class HandoverClient:
    """One master's calls to its slaves; ``master_addr`` is this master's advertised address."""

    def __init__(
        self, remoting: RemotingClient, *, broker_name: str, master_addr: str, timeout_s: float = HANDOVER_TIMEOUT_S
    ):
        self._remoting = remoting
        self._broker_name = broker_name
        self._master_addr = master_addr
        self._timeout_s = timeout_s

    async def take_progress(self, slave_addr: str) -> bytes:
        """The slave at ``slave_addr`` stops acting; returns its acting progress (the body of its answer)."""
        fields = BrokerNameRequestHeader.ext_fields(broker_name=self._broker_name, master_addr=self._master_addr)
        response = await self._invoke(slave_addr, RemotingCommand.request(ACTING_MASTER_HANDOVER, fields))
        return response.body

    async def progress_applied(self, slave_addr: str, version: int) -> None:
        """Tell the slave the master stored its progress up to ``version``."""
        fields = ActingProgressAppliedRequestHeader.ext_fields(
            broker_name=self._broker_name, master_addr=self._master_addr, version=version
        )
        await self._invoke(slave_addr, RemotingCommand.request(ACTING_PROGRESS_APPLIED, fields))

    async def _invoke(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        return expect_success(await self._remoting.invoke(addr, request, self._timeout_s))


class ProgressOffer:
    """A slave's offer of its acting progress to its master (``slave_addr``: this slave's advertised address, which
    the master calls back)."""

    def __init__(
        self,
        remoting: RemotingClient,
        *,
        broker_name: str,
        broker_id: int,
        slave_addr: str,
        timeout_s: float = OFFER_TIMEOUT_S,
    ):
        self._remoting = remoting
        self._broker_name = broker_name
        self._broker_id = broker_id
        self._slave_addr = slave_addr
        self._timeout_s = timeout_s

    async def offer(self, master_addr: str) -> None:
        """Returns once the master at ``master_addr`` took this slave's progress; raises when it did not."""
        fields = ActingProgressOfferRequestHeader.ext_fields(
            broker_name=self._broker_name, broker_id=self._broker_id, slave_addr=self._slave_addr
        )
        request = RemotingCommand.request(ACTING_PROGRESS_OFFER, fields)
        expect_success(await self._remoting.invoke(master_addr, request, self._timeout_s))
