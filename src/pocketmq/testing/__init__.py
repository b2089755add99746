"""Test doubles and harnesses shipped with the library (fake clock, real-process cluster harness), and a real
broker for a test suite: ``with pocketmq.testing.embedded_broker() as b:`` (docs/testing.md)."""

from typing import Any


def __getattr__(name: str) -> Any:
    # On first use only: the pytest plugin, loaded in every test run, imports this package but not the SDK.
    if name == "embedded_broker":
        from pocketmq.testing.embedded import embedded_broker

        return embedded_broker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
