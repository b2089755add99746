"""Structured-but-wrong requests for the broker's two ports, each reproducible from a seed and an index.

Remoting: for every served code (``server.broker_headers.BROKER_REQUEST_HEADERS``) a request whose header is valid
but for one to three fields made wrong by the field's own declaration (out of its integer range, not an integer,
an illegal name, a bad enum, too long, a control character, a required field left out), or whose JSON body is
wrong (not JSON, nested too deep, the wrong shape). Each such request must get INVALID_PARAMETER; codes without
fields get junk fields, which they ignore. gRPC: requests of every served RPC with wrong values (names, counts,
durations, timestamps, receipt handles) and undecodable bytes; each must get a status that is not an internal
error.

Names a fuzzed request could make valid are ``fz-...``: state outside that namespace must not change.
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass
from typing import Any

from pocketmq.protocol.codes import REGISTER_POP_STAGES, UPDATE_STAGE_OFFSETS, RequestCode, ResponseCode
from pocketmq.protocol.headers import INT64_MIN, Field, RequestHeader, int32, text, topic_name
from pocketmq.server.broker_headers import BROKER_REQUEST_HEADERS

FUZZ_PREFIX = "fz-"


class _TopicConfigHeader(RequestHeader):
    """UPDATE_AND_CREATE_TOPIC's fields as the fuzzer varies them (its handler reads a TopicConfig)."""

    topic: str = topic_name()
    read_queue_nums: int = int32("readQueueNums", 1, low=1, high=1024)
    write_queue_nums: int = int32("writeQueueNums", 1, low=1, high=1024)
    perm: int = int32("perm", 6, low=0, high=7)
    attributes: str = text("attributes", "+message.type=NORMAL", max_chars=1024)


# JSON-body codes: a body of the right shape, and per field values that body must refuse.
_JSON_BODIES: dict[int, tuple[dict[str, Any], dict[str, list[Any]]]] = {
    RequestCode.HEART_BEAT: (
        {"clientID": "fz-c", "consumerDataSet": [{"groupName": "fz-g0"}]},
        {
            "clientID": [-1, None, [], "x" * 300, "a\x00"],
            "consumerDataSet": [
                "no",
                [1],
                [{"groupName": "../x"}],
                [{"groupName": "fz-g0", "consumeType": "\u00b2"}],
                [{"groupName": "fz-g0", "subscriptionDataSet": [{"topic": "a/b"}]}],
                [{"groupName": "fz-g0", "messageModel": 9}],
            ],
        },
    ),
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: (
        {"groupName": "fz-g0", "retryMaxTimes": 3},
        {"groupName": ["../x", "", "a b", [], "t\n"], "retryMaxTimes": [-2, 2**40, "x", 1.5, True, None, {}]},
    ),
    RequestCode.BATCH_ACK_MESSAGE: ({"acks": []}, {"acks": ["no", {}, [{"c": "fz-g0"}], [1]]}),
    RequestCode.LOCK_BATCH_MQ: (
        {"consumerGroup": "fz-g0", "clientId": "fz-c", "mqSet": []},
        {
            "consumerGroup": ["../x", "a b"],
            "clientId": [-1, "", "x" * 300],
            "mqSet": [
                "no",
                [1],
                [{"topic": "../x", "brokerName": "b", "queueId": 0}],
                [{"topic": "fz-t0", "brokerName": "b", "queueId": -1}],
                [{"topic": "fz-t0", "brokerName": "b", "queueId": 2**40}],
            ],
        },
    ),
}
_JSON_BODIES[RequestCode.UNLOCK_BATCH_MQ] = _JSON_BODIES[RequestCode.LOCK_BATCH_MQ]


@dataclass
class RemotingCase:
    code: int
    fields: dict[str, str]
    body: bytes
    binary_header: bool
    expect: int | None  # the response code it must get; None: anything but SYSTEM_ERROR
    why: str

    def describe(self) -> str:
        return (
            f"code={self.code} fields={self.fields!r} body={self.body[:200]!r}"
            f"{'...' if len(self.body) > 200 else ''} binary={self.binary_header} ({self.why})"
        )


def case_rng(seed: int, index: int) -> random.Random:
    return random.Random(f"{seed}:{index}")


def remoting_case(seed: int, index: int) -> RemotingCase:
    """The ``index``-th remoting case of ``seed``."""
    rng = case_rng(seed, index)
    code = rng.choice(sorted(set(BROKER_REQUEST_HEADERS) | {RequestCode.UPDATE_BROKER_CONFIG}))
    binary = rng.random() < 0.3
    header = BROKER_REQUEST_HEADERS.get(code)
    if code == RequestCode.UPDATE_AND_CREATE_TOPIC:
        header = _TopicConfigHeader
    if code in _JSON_BODIES:
        body, why = _wrong_body(rng, *_JSON_BODIES[code])
        return RemotingCase(code, {}, body, binary, ResponseCode.INVALID_PARAMETER, why)
    if code == RequestCode.UPDATE_BROKER_CONFIG:
        body = rng.choice(
            [
                b"",
                b"fz_no_such_key=1",
                b"\xff\xfe=\x00",
                b"flush_disk_type=SOMETIMES",
                b"=" * 100,
                b"max_message_bytes=-1",
            ]
        )
        return RemotingCase(code, {}, body, binary, ResponseCode.INVALID_PARAMETER, "bad config text")
    if header is None:  # nothing to check: junk fields are ignored
        junk = {"x" + str(rng.randint(0, 9)): _junk_text(rng) for _ in range(rng.randint(0, 3))}
        return RemotingCase(code, junk, b"", binary, None, "junk fields on a code without fields")
    fields = {f.wire: _valid_text(f) for _, f in header.FIELDS}
    declared = [f for _, f in header.FIELDS]
    whys = []
    for f in rng.sample(declared, k=min(len(declared), rng.randint(1, 3))):
        value, why = _wrong_text(rng, f)
        if value is None:
            fields.pop(f.wire, None)
        else:
            fields[f.wire] = value
        whys.append(f"{f.name}: {why}")
    body = b"{}" if code in (UPDATE_STAGE_OFFSETS, REGISTER_POP_STAGES) else b""
    return RemotingCase(code, fields, body, binary, ResponseCode.INVALID_PARAMETER, "; ".join(whys))


def _int_range(f: Field) -> tuple[int, int]:
    """An int32 or int64 field's [low, high] (``headers.int32``/``int64`` always declare both)."""
    if f.low is None or f.high is None:
        raise ValueError(f"integer field {f.name} declares no range")
    return f.low, f.high


def _max_chars(f: Field) -> int:
    """A text, topic or group field's length limit (``headers`` always declares one)."""
    if f.max_chars is None:
        raise ValueError(f"field {f.name} declares no length limit")
    return f.max_chars


def _valid_text(f: Field) -> str:
    if f.kind in ("int32", "int64"):
        low, high = _int_range(f)
        return str(0 if low <= 0 <= high else low)
    if f.kind == "bool":
        return "false"
    if f.kind == "topic":
        return FUZZ_PREFIX + "t0"
    if f.kind == "group":
        return FUZZ_PREFIX + "g0"
    if f.kind == "choice":
        return f.choices[0]
    return "" if f.wire in ("properties", "i") else FUZZ_PREFIX + "v"


def _wrong_text(rng: random.Random, f: Field) -> tuple[str | None, str]:
    """A value ``f`` must refuse (None: leave a required field out)."""
    options: list[tuple[str | None, str]] = []
    if f.required:
        options += [(None, "missing"), ("", "blank")]
    if f.kind in ("int32", "int64"):
        low, high = _int_range(f)
        options += [
            (str(high + 1), "above its range"),
            (str(high + rng.randint(1, 2**70)), "far above"),
            ("1e400", "infinite"),
            ("nan", "not a number"),
            ("1.5", "a fraction"),
            ("0x10", "hex"),
            ("\u00b2", "a superscript digit"),
            ("z" + _junk_text(rng), "junk"),
        ]
        if low > INT64_MIN:
            options.append((str(low - rng.randint(1, 2**70)), "below its range"))
    elif f.kind == "bool":
        options += [("maybe", "not a boolean"), ("2", "not 0 or 1"), ("\u00fcber", "non-ASCII")]
    elif f.kind in ("topic", "group"):
        options += [
            ("../x", "a path"),
            ("a/b", "a slash"),
            (FUZZ_PREFIX + "t\n", "a trailing newline"),
            (" ", "blank"),
            ("x" * (_max_chars(f) + 1), "too long"),
            ("t\u00e9", "non-ASCII"),
            ("a b", "a space"),
        ]
    elif f.kind == "choice":
        options += [("\u00c4" + f.choices[0], "non-ASCII"), ("NOPE", "not a choice"), (f.choices[0] + "\n", "newline")]
    elif f.kind == "text":
        options.append(("x" * (_max_chars(f) + 1), "too long"))
        if not f.control_ok:
            options += [("a\x00b", "a NUL"), ("line\nbreak", "a newline")]
    return rng.choice(options)


def _junk_text(rng: random.Random) -> str:
    return "".join(rng.choice(string.printable + "\u00e9\u2603\x00") for _ in range(rng.randint(0, 40)))


def _wrong_body(rng: random.Random, valid: dict, wrong_values: dict[str, list]) -> tuple[bytes, str]:
    kind = rng.randrange(6)
    if kind == 0:
        depth = rng.choice([40, 1000, 100_000])
        return b"[" * depth + b"]" * depth, f"nested {depth} deep"
    if kind == 1:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))) + b"\xff", "random bytes"
    if kind == 2:
        return json.dumps(rng.choice([[1, 2], "str", 123, None, True])).encode(), "the wrong JSON type"
    if kind == 3:
        return b"", "no body"
    key = rng.choice(sorted(wrong_values))
    value = rng.choice(wrong_values[key])
    return json.dumps({**valid, key: value}).encode(), f"{key}={value!r:.40}"
