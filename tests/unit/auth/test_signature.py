"""Request signatures against the vectors RocketMQ's clients produce (remoting: Java's AclClientRPCHook; gRPC:
the MQv2-HMAC-SHA1 header of the 5.x clients)."""

from __future__ import annotations

import base64

import pytest

from pocketmq.auth.signature import (
    grpc_authorization,
    grpc_signature_matches,
    parse_grpc_authorization,
    remoting_content,
    remoting_signature,
    remoting_signature_matches,
    sign_remoting,
)

pytestmark = pytest.mark.timeout(10)
FIELDS = {"AccessKey": "RocketMQ", "commitOffset": "42", "consumerGroup": "g1", "queueId": "0", "topic": "t1"}


def test_the_remoting_vector():
    assert remoting_content(FIELDS, None) == b"RocketMQ42g10t1"
    assert remoting_signature("12345678", FIELDS, None) == "slhUoIsyUpdSSJCKaLyMJsQtgvM="


def test_numbers_and_booleans_are_signed_as_a_javascript_client_wrote_them():
    as_json = {**FIELDS, "commitOffset": 42, "queueId": 0}
    assert remoting_signature("12345678", as_json, None) == "slhUoIsyUpdSSJCKaLyMJsQtgvM="
    assert remoting_content({"a": True, "b": False, "c": 1.0}, None) == b"truefalse1"


def test_keys_in_java_order_and_the_body_last():
    # upper case before lower case (ASCII), then the body's raw bytes
    assert remoting_content({"b": "2", "B": "1", "a": "3"}, b"\x00body") == b"132\x00body"
    # Java compares UTF-16 code units: U+FF5E (one unit, 0xFF5E) sorts after U+1F600 (units 0xD83D 0xDE00)
    assert remoting_content({"\uff5e": "late", "\U0001f600": "early"}, None) == b"earlylate"


def test_sign_then_verify_and_every_change_breaks_it():
    fields = {"topic": "t1", "queueId": "3"}
    sign_remoting(fields, b"body", "ak", "secret")
    assert fields["AccessKey"] == "ak" and remoting_signature_matches("secret", fields, b"body")
    assert not remoting_signature_matches("other", fields, b"body")
    assert not remoting_signature_matches("secret", fields, b"bodz")
    assert not remoting_signature_matches("secret", {**fields, "queueId": "4"}, b"body")
    assert not remoting_signature_matches("secret", {**fields, "extra": "x"}, b"body")
    assert not remoting_signature_matches("secret", {k: v for k, v in fields.items() if k != "Signature"}, b"body")


def test_a_field_left_out_by_rule_is_not_signed():
    fields = {"topic": "t1"}
    sign_remoting(fields, None, "ak", "sk")
    fields["_UNIQUE_KEY_QUERY"] = "true"  # an old client added it after signing
    assert not remoting_signature_matches("sk", fields, None)
    assert remoting_signature_matches("sk", fields, None, exclude=["_UNIQUE_KEY_QUERY"])


def test_the_grpc_vector_in_both_hex_cases():
    header = grpc_authorization("ak", "12345678", "20240102T030405Z")
    assert header.endswith("Signature=0183EC6E9BF0753CA4402ACB305F8E39D222458F")
    credential = parse_grpc_authorization(header)
    assert credential is not None and credential.access_key == "ak"
    assert base64.b64encode(credential.signature) == b"AYPsbpvwdTykQCrLMF+OOdIiRY8="
    assert grpc_signature_matches("12345678", "20240102T030405Z", credential)
    assert not grpc_signature_matches("12345678", "20240102T030406Z", credential)
    head, _, hex_signature = header.rpartition("=")
    lower = parse_grpc_authorization(f"{head}={hex_signature.lower()}")
    assert lower is not None and grpc_signature_matches("12345678", "20240102T030405Z", lower)


def test_the_python_client_s_header_as_it_sends_it():
    # Credential may carry more after a '/', spaces around parts are trimmed, SignedHeaders is not read
    value = "MQv2-HMAC-SHA1 Credential=ak/x, SignedHeaders=x-mq-date-time,Signature=0183ec6e9bf0753ca4402acb305f8e39d222458f"
    credential = parse_grpc_authorization(value)
    assert credential is not None and credential.access_key == "ak"


@pytest.mark.parametrize(
    "value",
    [
        "",
        "Basic abc",
        "MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time",  # no signature
        "MQv2-HMAC-SHA1 SignedHeaders=x-mq-date-time, Signature=00",  # no credential
        "MQv2-HMAC-SHA1 Credential=ak, Signature=zz",  # not hex
    ],
)
def test_what_is_not_a_credential(value):
    assert parse_grpc_authorization(value) is None


def test_an_empty_access_key_parses_as_the_python_client_sends_it_without_credentials():
    credential = parse_grpc_authorization("MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=00")
    assert credential is not None and credential.access_key == ""
