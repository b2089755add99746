"""The proxy's pure parts: a broker's remoting refusal as a v2 status, and receipt handles as remoting extraInfo."""

from __future__ import annotations

import pytest

from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.protocol.codes import ResponseCode, V2StatusCode
from pocketmq.protocol.error_codes import RemoteServerError, v2_code_of
from pocketmq.proxy.options import ProxyOptions


@pytest.mark.parametrize(
    ("response_code", "v2_code"),
    [
        (ResponseCode.TOPIC_NOT_EXIST, V2StatusCode.TOPIC_NOT_FOUND),
        (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, V2StatusCode.CONSUMER_GROUP_NOT_FOUND),
        (ResponseCode.NO_PERMISSION, V2StatusCode.FORBIDDEN),
        (ResponseCode.SYSTEM_BUSY, V2StatusCode.TOO_MANY_REQUESTS),
        (ResponseCode.SLAVE_NOT_AVAILABLE, V2StatusCode.HA_NOT_AVAILABLE),
        (ResponseCode.INVALID_PARAMETER, V2StatusCode.BAD_REQUEST),
        (ResponseCode.SYSTEM_ERROR, V2StatusCode.INTERNAL_SERVER_ERROR),
    ],
)
def test_a_brokers_refusal_becomes_the_v2_status_a_proxy_answers(response_code, v2_code):
    assert v2_code_of(RemoteServerError(response_code, "refused")) == v2_code


def test_a_receipt_handle_names_its_extra_info_and_broker():
    handle = ReceiptHandle.decode("orders 5 1700000000000 30000 3 1 broker-b 2 7 4096")
    assert handle.extra_info == "5 1700000000000 30000 3 1 broker-b 2 7"
    assert handle.broker_name == "broker-b"


@pytest.mark.parametrize("bad", [{"workers": 0}, {"grpc_port": 70000}])
def test_options_refuse_impossible_values(bad):
    with pytest.raises(ValueError):
        ProxyOptions(namesrv_addr="127.0.0.1:9876", **bad)


@pytest.mark.parametrize(
    "bad", [{"access_key": "proxy"}, {"authentication_enabled": True}, {"authorization_enabled": True}]
)
def test_access_control_needs_the_proxys_own_credentials(bad):
    with pytest.raises(ValueError):
        ProxyOptions(namesrv_addr="127.0.0.1:9876", **bad)
