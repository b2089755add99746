"""PocketMQ's pytest plugin: a real broker for a test suite in one fixture (docs/testing.md).

Installed with the package (entry point ``pytest11``); ``-p no:pocketmq.testing.pytest_plugin`` turns it off.

- ``pocketmq_broker``: one broker for the whole session (``EmbeddedBroker``), shared by the tests that ask for it.
- ``pocketmq_broker_per_test``: a broker of the test's own, stopped after it.
- ``pocketmq_topic``: a new topic (4 queues) on the session broker, for a test of its own.

This module imports no broker code: loaded in every pytest run of an environment where PocketMQ is installed, it
costs nothing until a test asks for a broker. Once collection finds one that does, a standby process starts
importing the broker (``pocketmq.testing.standby``) while the tests before the first that needs one run.
"""

from __future__ import annotations

import pytest

FIXTURES = ("pocketmq_broker", "pocketmq_broker_per_test", "pocketmq_topic")


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(name in FIXTURES for item in session.items for name in getattr(item, "fixturenames", ())):
        from pocketmq.testing.standby import STANDBYS

        STANDBYS.prewarm()


@pytest.fixture(scope="session")
def pocketmq_broker(tmp_path_factory: pytest.TempPathFactory):
    """A broker shared by the session's tests: keep tests apart by topic (``pocketmq_topic``, ``unique_topic()``)."""
    from pocketmq.testing.embedded import embedded_broker

    with embedded_broker(tmp_path_factory.mktemp("pocketmq-broker")) as broker:
        yield broker


@pytest.fixture
def pocketmq_broker_per_test(tmp_path_factory: pytest.TempPathFactory):
    """A broker of this test's own, with a fresh data directory, stopped after the test."""
    from pocketmq.testing.embedded import embedded_broker

    with embedded_broker(tmp_path_factory.mktemp("pocketmq-broker")) as broker:
        yield broker


@pytest.fixture
def pocketmq_topic(pocketmq_broker) -> str:
    """A topic of this test's own on the session broker, created and routed."""
    return pocketmq_broker.create_topic()
