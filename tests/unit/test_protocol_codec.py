"""Property tests of the remoting frame codec (both header encodings) and the message record codec."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.message import Message, MessageExt, make_offset_msg_id, parse_offset_msg_id
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.record import RecordFormatError, decode_record, decode_records, encode_record
from pocketmq.protocol.batch_codec import decode_batch, encode_batch
from pocketmq.protocol.command import (
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    FrameDecoder,
    MalformedFrameError,
    RemotingCommand,
)

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02"), max_size=20)
_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-%|", min_size=1, max_size=40)
_props = st.dictionaries(_names, _text.filter(bool), max_size=6)
_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(0, 2**62)
_ip = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))


@given(
    code=st.integers(0, 32767),
    fields=st.dictionaries(_names, _text, max_size=8),
    body=st.binary(max_size=300),
    remark=st.none() | _text,
    opaque=_int32,
    stype=st.sampled_from([SERIALIZE_JSON, SERIALIZE_ROCKETMQ]),
    flag=st.integers(0, 3),
)
def test_frame_round_trip_in_both_header_encodings(code, fields, body, remark, opaque, stype, flag):
    cmd = RemotingCommand(
        code=code, ext_fields=fields, body=body, opaque=opaque, flag=flag, remark=remark, serialize_type=stype
    )
    (decoded,) = FrameDecoder().feed(cmd.encode())
    assert (decoded.code, decoded.ext_fields, decoded.body, decoded.opaque, decoded.flag) == (
        code,
        fields,
        body,
        opaque,
        flag,
    )
    assert decoded.serialize_type == stype
    assert (decoded.remark or None) == (remark or None)


@given(
    cmds=st.lists(st.tuples(st.integers(0, 400), st.binary(max_size=50)), min_size=1, max_size=6),
    cuts=st.lists(st.integers(1, 40), max_size=10),
)
def test_decoder_reassembles_frames_split_anywhere(cmds, cuts):
    stream = b"".join(RemotingCommand(code=c, body=b).encode() for c, b in cmds)
    decoder, out, pos = FrameDecoder(), [], 0
    for cut in cuts:
        out += decoder.feed(stream[pos : pos + cut])
        pos += cut
    out += decoder.feed(stream[pos:])
    assert [(c.code, c.body) for c in out] == cmds


@pytest.mark.parametrize(
    "frame",
    [
        b"\x00\x00\x00\x02ab",  # shorter than its own header-length field
        b"\x00\x00\x00\x08\x00\x00\x00\x10abcd",  # header length beyond the frame
        b"\x00\x00\x00\x06\x00\x00\x00\x02{]",  # JSON that does not parse
        b"\x00\x00\x00\x0a\x05\x00\x00\x02{}xxxx",  # unknown serialize type
        b"\x7f\xff\xff\xff",  # absurd length
    ],
)
def test_malformed_frames_raise(frame):
    with pytest.raises(MalformedFrameError):
        FrameDecoder().feed(frame)


def test_json_header_numbers_and_booleans_become_strings():
    header = b'{"code":10,"opaque":5,"flag":0,"extFields":{"queueId":3,"unitMode":false,"x":"y"}}'
    frame = (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.ext_fields == {"queueId": "3", "unitMode": "false", "x": "y"}


@pytest.mark.parametrize(
    "header",
    [
        b'{"code":10,"opaque":5}',
        b' \n{"code":10, "opaque":5}\t ',  # whitespace around the object: decoded as JSON allows
        b'{"code":10,"opaque":5,"extFields":{"k":"a\\u0001b"}}',
    ],
)
def test_json_headers_decode_with_or_without_whitespace_around(header):
    frame = (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header
    (cmd,) = FrameDecoder().feed(frame)
    assert (cmd.code, cmd.opaque) == (10, 5)


@pytest.mark.parametrize("header", [b'{"code":10}{}', b'{"code":10} x', b" ", b"", b'{"code":10'])
def test_json_headers_with_extra_or_missing_text_are_malformed(header):
    frame = (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header
    with pytest.raises(MalformedFrameError):
        FrameDecoder().feed(frame)


def test_pop_codes_travel_as_int16_in_the_binary_header():
    cmd = RemotingCommand(code=200050, serialize_type=SERIALIZE_ROCKETMQ)
    (decoded,) = FrameDecoder().feed(cmd.encode())
    assert decoded.code == 3442


@given(props=_props)
def test_properties_round_trip(props):
    assert decode_properties(encode_properties(props)) == props


@given(
    topic=_names,
    body=st.binary(max_size=2000),
    props=_props,
    queue_id=st.integers(0, 1023),
    flag=_int32,
    queue_offset=_int64,
    phys_offset=_int64,
    sys_flag=st.integers(0, 15),
    born=_int64,
    store=_int64,
    born_ip=_ip,
    store_ip=_ip,
    port=st.integers(0, 65535),
    reconsume=st.integers(0, 1000),
)
def test_record_round_trip(
    topic,
    body,
    props,
    queue_id,
    flag,
    queue_offset,
    phys_offset,
    sys_flag,
    born,
    store,
    born_ip,
    store_ip,
    port,
    reconsume,
):
    msg = MessageExt(
        topic=topic,
        body=body,
        properties=props,
        flag=flag,
        queue_id=queue_id,
        queue_offset=queue_offset,
        phys_offset=phys_offset,
        sys_flag=sys_flag,
        born_timestamp_ms=born,
        born_host=(born_ip, port),
        store_timestamp_ms=store,
        store_host=(store_ip, port),
        reconsume_times=reconsume,
    )
    record = encode_record(msg)
    decoded, end = decode_record(record + b"trailing")
    assert end == len(record) == decoded.store_size
    assert decoded == msg


def test_records_back_to_back_and_truncation_detected():
    msgs = [MessageExt(topic="t", body=bytes([i]) * i, queue_offset=i) for i in range(5)]
    blob = b"".join(encode_record(m) for m in msgs)
    assert [m.queue_offset for m in decode_records(blob)] == list(range(5))
    with pytest.raises(RecordFormatError):
        decode_records(blob[:-1])


@given(msgs=st.lists(st.tuples(st.binary(max_size=300), _props, _int32), min_size=1, max_size=8))
def test_batch_round_trip(msgs):
    batch = [Message(topic="orders", body=b, properties=p, flag=f) for b, p, f in msgs]
    decoded = decode_batch(encode_batch(batch), "orders")
    assert all(type(m) is MessageExt for m in decoded)
    assert [Message(m.topic, m.body, m.properties, m.flag) for m in decoded] == batch


@given(ip=_ip, port=st.integers(0, 65535), phys=_int64)
def test_offset_msg_id_round_trip(ip, port, phys):
    msg_id = make_offset_msg_id((ip, port), phys)
    assert len(msg_id) == 32 and msg_id == msg_id.upper()
    assert parse_offset_msg_id(msg_id) == ((ip, port), phys)
