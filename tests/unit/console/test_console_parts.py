"""The console's pure parts: input checks, the HTTP status of each error, chart samples and the HTML tables."""

from __future__ import annotations

import pytest

from pocketmq.common.errors import (
    AccessDeniedError,
    BadRequestError,
    IllegalTopicError,
    RemotingTimeoutError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from pocketmq.console.errors import Unauthenticated, status_of
from pocketmq.console.history import MAX_SAMPLES, History
from pocketmq.console.html import line_chart, table
from pocketmq.console.requests import flag, float_field, int_field, str_field
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.error_codes import RemoteServerError


def test_fields_are_checked_before_use():
    assert int_field({"n": "12"}, "n") == 12 and int_field({}, "n", default=3) == 3
    for bad in ({"n": "x"}, {"n": True}, {"n": -1}, {"n": [1]}):
        with pytest.raises(BadRequestError, match="n must"):
            int_field(bad, "n")
    assert float_field({"r": "0.5"}, "r") == 0.5 and float_field({}, "r") is None
    with pytest.raises(BadRequestError):
        float_field({"r": "half"}, "r")
    with pytest.raises(BadRequestError, match="required"):
        str_field({}, "topic", required=True)
    with pytest.raises(BadRequestError):
        str_field({"topic": 3}, "topic")
    assert flag({"all": "1"}, "all") and not flag({}, "all")
    with pytest.raises(BadRequestError):
        flag({"all": "maybe"}, "all")


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (BadRequestError("x"), 400),
        (IllegalTopicError("x"), 400),
        (TopicNotExistError("x"), 404),
        (SubscriptionGroupNotExistError("x"), 404),
        (Unauthenticated("x"), 401),
        (AccessDeniedError("check signature failed."), 401),
        (AccessDeniedError("User:bob is not found."), 401),
        (AccessDeniedError("bob has no Pub on Topic:t, no matched policies."), 403),
        (RemoteServerError(ResponseCode.NO_PERMISSION, "check signature failed."), 401),
        (RemoteServerError(ResponseCode.NO_PERMISSION, "no matched policies."), 403),
        (RemoteServerError(ResponseCode.TOPIC_NOT_EXIST, "no topic"), 404),
        (RemoteServerError(ResponseCode.SYSTEM_ERROR, "boom"), 502),
        (RemotingTimeoutError("slow"), 502),
        (RuntimeError("a bug"), 500),
    ],
)
def test_each_error_has_the_status_that_says_whose_fault_it_was(error, status):
    assert status_of(error) == status


def test_history_keeps_the_latest_samples_and_rates_of_totals():
    now = [0.0]
    history = History(clock=lambda: now[0])
    for total in (0, 10, 30, 5):  # the last: the broker restarted
        history.add("put", total)
        now[0] += 2.0
    assert history.rates("put") == [(2.0, 5.0), (4.0, 10.0), (6.0, 0.0)]
    history.add("put", 7)
    history.add("put", 9)  # the same moment (two pages polling): one sample
    assert history.values("put")[-1] == (8.0, 9)
    for i in range(MAX_SAMPLES + 10):
        now[0] += 1
        history.add("lag", i)
    assert len(history.values("lag")) == MAX_SAMPLES and history.values("lag")[-1][1] == MAX_SAMPLES + 9


def test_tables_escape_and_mark_rows_and_cells():
    html = table(
        "t", ["topic", "queues"], [{"topic": "<b>", "queues": 4}], row_key="topic", links={"topic": "/t/{value}"}
    )
    assert '<tr data-key="&lt;b&gt;">' in html and '<td data-field="queues">4</td>' in html
    assert "<b>" not in html
    chart = line_chart("c", "rate", {"put": [(0.0, 1.0), (5.0, 3.0)]}, "msg/s")
    assert 'data-series="put" data-latest="3.000"' in chart and "<polyline" in chart
    assert "<polyline" not in line_chart("c", "rate", {}, "msg/s")
