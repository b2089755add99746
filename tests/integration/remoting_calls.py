"""Helpers of the broker's remoting tests: a module-wide ``pocketmq serve`` process and raw remoting calls."""

from __future__ import annotations

import pytest

from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.processes import broker_process
from pocketmq.testing.raw_remoting import call, queue_messages, send

__all__ = ["call", "client", "queue_messages", "send", "serve_for_module"]


def serve_for_module(tmp_path_factory, name: str, extra_args: list[str]):
    """Yield a started broker (embedded name server); stop it after the module and check it stopped cleanly."""
    proc = broker_process(tmp_path_factory.mktemp(name), name, extra_args=extra_args).start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture
async def client():
    """A remoting client of its own per test (its own connections)."""
    remoting = RemotingClient()
    yield remoting
    await remoting.close()
