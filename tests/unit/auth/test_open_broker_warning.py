"""A broker reachable from other machines without access control says at every start what that allows."""

from __future__ import annotations

from pocketmq.broker.config import BrokerConfig
from pocketmq.cli.serve_cmd import warn_if_open


def test_the_warning_names_the_risks_off_loopback_only(capsys):
    warn_if_open(BrokerConfig(host="0.0.0.0"))
    warning = capsys.readouterr().err
    for request in (
        "DELETE_TOPIC_IN_BROKER",
        "UPDATE_BROKER_CONFIG",
        "UNREGISTER_BROKER",
        "REGISTER_BROKER",
        "HA_PULL_COMMIT_LOG",
        "ESCAPE_PUT_MESSAGE",
    ):
        assert request in warning
    for quiet in (
        BrokerConfig(host="127.0.0.1"),
        BrokerConfig(host="::1"),
        BrokerConfig(host="localhost"),
        BrokerConfig(host="0.0.0.0", authentication_enabled=True, inner_access_key="i", inner_secret_key="s"),
    ):
        warn_if_open(quiet)
        assert capsys.readouterr().err == ""
