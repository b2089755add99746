"""Whether the failover tests can start etcd: the version `etcd --version` prints, and the fix it names."""

from __future__ import annotations

import pytest

from pocketmq.testing.etcd import etcd_major, etcd_problem, etcd_required


@pytest.mark.parametrize(
    "output, major",
    [("etcd Version: 3.4.23\nGit SHA: Not provided", 3), ("etcd Version: 2.3.8", 2), ("no such command", None)],
)
def test_the_major_version_of_etcd_version_output(output, major):
    assert etcd_major(output) == major


def test_a_missing_or_old_etcd_is_a_problem_that_says_how_to_fix_it(tmp_path, monkeypatch):
    etcd = tmp_path / "etcd"
    etcd.write_text("#!/bin/sh\necho 'etcd Version: 2.3.8'\n")
    etcd.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert etcd_problem() == (
        f"{etcd} is not etcd 3.x (etcd Version: 2.3.8); install etcd 3.x (Debian: apt-get install etcd-server) and "
        "put etcd on PATH"
    )
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert etcd_problem().startswith("etcd not found on PATH; install etcd 3.x")


@pytest.mark.parametrize("value, required", [("true", True), ("", False), ("false", False)])
def test_ci_makes_etcd_required_as_it_does_java(monkeypatch, value, required):
    monkeypatch.setenv("CI", value)
    assert etcd_required() is required
