"""Shared fixtures. Real-process helpers live in pocketmq.testing.processes."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# Property tests run on a 2-core CI machine: bounded examples, no wall-clock deadline per example.
settings.register_profile("pocketmq", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "pocketmq"))


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A temporary HOME: the official client writes its logs under ~/logs."""
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path
