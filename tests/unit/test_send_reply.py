"""A send's reply (remoting_broker._send_reply) encodes to the bytes the generic encoder gives for it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.messages import SendResult
from pocketmq.common.message import make_offset_msg_id
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import SERIALIZE_JSON, SERIALIZE_ROCKETMQ, FrameDecoder, RemotingCommand
from pocketmq.server.remoting_broker import _send_reply
from pocketmq.store.api import PutStatus

_results = st.lists(
    st.builds(
        lambda status, queue_id, queue_offset, phys_offset: SendResult(
            status=status,
            msg_id="K",
            offset_msg_id=make_offset_msg_id(("10.0.0.7", 10911), phys_offset),
            queue_id=queue_id,
            queue_offset=queue_offset,
            phys_offset=phys_offset,
        ),
        st.sampled_from(list(PutStatus)),
        st.integers(0, 1023),
        st.integers(0, 2**62),
        st.integers(0, 2**62),
    ),
    min_size=1,
    max_size=4,
)


@given(
    results=_results,
    opaque=st.integers(-(2**31), 2**31 - 1),
    stype=st.sampled_from([SERIALIZE_JSON, SERIALIZE_ROCKETMQ]),
)
def test_send_reply_bytes_are_the_generic_encoding(results, opaque, stype):
    request = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, opaque=opaque, serialize_type=stype)
    reply = _send_reply(request, results)
    assert reply.encode() == RemotingCommand.encode(reply)
    (decoded,) = FrameDecoder().feed(reply.encode())
    assert decoded.opaque == opaque and decoded.is_response
    assert decoded.ext_fields["msgId"] == ",".join(r.offset_msg_id for r in results)
    assert decoded.ext_fields["queueOffset"] == str(results[0].queue_offset)


@pytest.mark.parametrize(
    "status, code",
    [(PutStatus.PUT_OK, ResponseCode.SUCCESS), (PutStatus.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_DISK_TIMEOUT)],
)
def test_send_reply_code_is_the_weakest_guarantee(status, code):
    ok = SendResult(PutStatus.PUT_OK, "K", "0A00000700002A9F0000000000000000", 1, 0, 0)
    weak = SendResult(status, "K", "0A00000700002A9F0000000000000001", 1, 1, 1)
    request = RemotingCommand(code=RequestCode.SEND_BATCH_MESSAGE, opaque=7)
    (decoded,) = FrameDecoder().feed(_send_reply(request, [ok, weak]).encode())
    assert decoded.code == code
