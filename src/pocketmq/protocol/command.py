"""RocketMQ remoting frames and commands.

Frame layout (big-endian)::

    int32 length                  = 4 + header_length + body_length
    int32 type_and_header_length  high byte: 0 JSON, 1 ROCKETMQ binary; low 3 bytes: header_length
    header                        JSON object, or the binary layout below
    body                          the rest of the frame

Binary header: int16 code, int8 language, int16 version, int32 opaque, int32 flag, int32 remark length +
UTF-8 remark, int32 ext-fields length + entries of (int16 key length + key, int32 value length + value).

A reply echoes the request's ``opaque`` and sets flag bit 0; flag bit 1 marks a oneway request.
"""

from __future__ import annotations

import itertools
import json
import struct
from dataclasses import dataclass, field

from pocketmq.protocol import limits as limit_names
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.json_depth import json_too_deep
from pocketmq.protocol.limits import CLIENT_LIMITS, ConnectionLimits

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1

FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2

_LANGUAGES = [
    "JAVA",
    "CPP",
    "DOTNET",
    "PYTHON",
    "DELPHI",
    "ERLANG",
    "RUBY",
    "OTHER",
    "HTTP",
    "GO",
    "PHP",
    "OMS",
    "RUST",
    "NODE_JS",
]
_LANGUAGE_CODE = {name: i for i, name in enumerate(_LANGUAGES)}
_opaque_counter = itertools.count(1)
_INT32 = struct.Struct(">i")
_FRAME_PREFIX = struct.Struct(">ii")
_BIN_FIXED = struct.Struct(">hbhii")
_json_string = json.encoder.encode_basestring  # a str as a JSON string literal, non-ASCII kept (C speed)
_JSON_HEADER_DECODER = json.JSONDecoder()
_INT32_MIN, _INT32_MAX = -0x8000_0000, 0x7FFF_FFFF


class MalformedFrameError(ValueError):
    """The bytes are not a remoting frame; the connection that sent them must be closed.

    ``limit`` names the limit the frame broke (``pocketmq.protocol.limits``), MALFORMED_FRAME when it is not one.
    """

    def __init__(self, message: str, limit: str = limit_names.MALFORMED_FRAME):
        super().__init__(message)
        self.limit = limit


@dataclass(slots=True)
class RemotingCommand:
    code: int
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    language: str = "PYTHON"
    version: int = 317  # RocketMQ 4.9.x's V4_9_4, what 4.x peers expect to see
    serialize_type: int = SERIALIZE_JSON

    @classmethod
    def request(cls, code: int, ext_fields: dict | None = None, body: bytes = b"", *, oneway: bool = False):
        fields = _ext_strs(ext_fields) if ext_fields else {}
        return cls(
            code=int(code),
            ext_fields=fields,
            body=body,
            opaque=next(_opaque_counter),
            flag=FLAG_ONEWAY if oneway else 0,
        )

    def response(
        self,
        code: int = ResponseCode.SUCCESS,
        ext_fields: dict | None = None,
        body: bytes = b"",
        remark: str | None = None,
    ) -> RemotingCommand:
        """A reply to this request, in the request's header encoding."""
        fields = _ext_strs(ext_fields) if ext_fields else {}
        return RemotingCommand(
            code=int(code),
            ext_fields=fields,
            body=body,
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            serialize_type=self.serialize_type,
        )

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def encode(self) -> bytes:
        """The whole frame, length prefix included."""
        header = _encode_binary_header(self) if self.serialize_type == SERIALIZE_ROCKETMQ else _encode_json_header(self)
        return encode_frame(self.serialize_type, header, self.body)

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "request"
        return (
            f"<RemotingCommand {kind} code={self.code} opaque={self.opaque} fields={len(self.ext_fields)} "
            f"body={len(self.body)}B>"
        )


def encode_frame(serialize_type: int, header: bytes, body: bytes) -> bytes:
    """A frame of an encoded header and a body, length prefix included."""
    return _FRAME_PREFIX.pack(4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def decode_frame(frame: bytes | memoryview, limits: ConnectionLimits = CLIENT_LIMITS) -> RemotingCommand:
    """Decode one frame *without* its leading int32 length."""
    if len(frame) < 4:
        raise MalformedFrameError("frame shorter than its header length field")
    (type_and_len,) = _INT32.unpack_from(frame, 0)
    serialize_type = (type_and_len >> 24) & 0xFF
    header_len = type_and_len & 0xFFFFFF
    if 4 + header_len > len(frame):
        raise MalformedFrameError(f"header length {header_len} exceeds frame length {len(frame)}")
    if header_len > limits.max_header_bytes:
        raise MalformedFrameError(
            f"header length {header_len} over {limits.max_header_bytes}", limit_names.HEADER_BYTES
        )
    header = frame[4 : 4 + header_len]  # a JSON header is decoded to text straight from the frame: no copy
    body = bytes(frame[4 + header_len :])
    if serialize_type == SERIALIZE_JSON:
        cmd = _decode_json_header(header, limits.max_json_depth)
    elif serialize_type == SERIALIZE_ROCKETMQ:
        cmd = _decode_binary_header(bytes(header))
    else:
        raise MalformedFrameError(f"unknown serialize type {serialize_type}")
    cmd.body = body
    cmd.serialize_type = serialize_type
    return cmd


class FrameDecoder:
    """Incremental decoder: ``feed`` bytes as they arrive, get back the complete commands.

    A frame's length and header length are checked against ``limits`` as soon as their 8 bytes are in, so a frame
    over the limit is refused before its body is buffered.
    """

    def __init__(self, limits: ConnectionLimits = CLIENT_LIMITS):
        self._buffer = bytearray()
        self._limits = limits

    @property
    def buffered_bytes(self) -> int:
        """Bytes of a frame not complete yet."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        self._buffer += data
        commands = []
        buf = self._buffer
        pos = 0
        limits = self._limits
        max_frame_bytes = limits.max_frame_bytes
        while len(buf) - pos >= 4:
            (length,) = _INT32.unpack_from(buf, pos)
            if length < 4:
                raise MalformedFrameError(f"frame length {length} below 4")
            if length > max_frame_bytes:
                raise MalformedFrameError(f"frame length {length} over {max_frame_bytes}", limit_names.FRAME_BYTES)
            if len(buf) - pos - 4 < length:
                if len(buf) - pos >= 8:
                    header_len = _INT32.unpack_from(buf, pos + 4)[0] & 0xFFFFFF
                    if header_len > limits.max_header_bytes:
                        raise MalformedFrameError(
                            f"header length {header_len} over {limits.max_header_bytes}", limit_names.HEADER_BYTES
                        )
                break
            commands.append(decode_frame(memoryview(buf)[pos + 4 : pos + 4 + length], limits))
            pos += 4 + length
        if pos:
            del buf[:pos]
        return commands


def _ext_str(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _ext_strs(fields: dict) -> dict[str, str]:
    """``fields`` with every value a string and None values left out (strings pass as they are: hot path)."""
    return {k: v if type(v) is str else _ext_str(v) for k, v in fields.items() if v is not None}


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    # Formatted by hand (the same bytes json.dumps gives): ext field values are strings, so each key and value is
    # one C string escape; building a dict for the JSON encoder costs about twice as much per frame.
    quote = _json_string
    remark = f',"remark":{quote(cmd.remark)}' if cmd.remark is not None else ""
    ext = cmd.ext_fields
    ext_json = (',"extFields":{' + ",".join([f"{quote(k)}:{quote(v)}" for k, v in ext.items()]) + "}") if ext else ""
    return (
        f'{{"code":{cmd.code:d},"language":{quote(cmd.language)},"version":{cmd.version:d},'
        f'"opaque":{cmd.opaque:d},"flag":{cmd.flag:d},"serializeTypeCurrentRPC":"JSON"{remark}{ext_json}}}'
    ).encode()


def _decode_json_header(header: bytes | memoryview, max_depth: int) -> RemotingCommand:
    try:
        text = str(header, "utf-8")  # RocketMQ writes UTF-8: no encoding sniffing
    except UnicodeDecodeError as exc:
        raise MalformedFrameError(f"JSON header is not UTF-8: {exc}") from None
    if text.count("{") + text.count("[") > max_depth and json_too_deep(text, max_depth):  # the count: hot path
        raise MalformedFrameError(f"JSON header nests deeper than {max_depth}", limit_names.JSON_DEPTH)
    try:
        try:
            # The usual header is one object without whitespace around it: scanned directly, that skips the two
            # whitespace matches of JSONDecoder.decode (~0.5 µs a frame). Anything else takes decode(), which
            # gives the same object or the same error. (JSONDecoder sets scan_once in __init__; typeshed omits it.)
            obj, end = _JSON_HEADER_DECODER.scan_once(text, 0)  # type: ignore[attr-defined]
        except StopIteration:
            end = -1
        if end != len(text):
            obj = _JSON_HEADER_DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise MalformedFrameError(f"JSON header does not parse: {exc}") from None
    if not isinstance(obj, dict):
        raise MalformedFrameError("JSON header is not an object")
    try:
        ext = obj.get("extFields") or {}
        if not isinstance(ext, dict):
            raise MalformedFrameError("extFields is not an object")
        # Values arrive as strings, numbers or booleans depending on the client: keep them as strings. JSON keys
        # are strings already, and the parsed dict is kept when every value is one too (the usual case).
        for value in ext.values():
            if type(value) is not str:
                ext = _ext_strs(ext)
                break
        remark = obj.get("remark")
        if remark is not None and type(remark) is not str:
            raise ValueError("remark is not a string")
        code, opaque, flag, version = obj["code"], obj.get("opaque", 0), obj.get("flag", 0), obj.get("version", 0)
        if not (
            type(code) is type(opaque) is type(flag) is type(version) is int  # the usual case: one check
            and _INT32_MIN <= min(code, opaque, flag, version)
            and max(code, opaque, flag, version) <= _INT32_MAX
        ):
            code, opaque, flag, version = _int32(code), _int32(opaque), _int32(flag), _int32(version)
        # positional: half the cost of naming the fields (~0.25 µs a frame)
        return RemotingCommand(code, ext, b"", opaque, flag, remark, str(obj.get("language", "JAVA")), version)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, MalformedFrameError):
            raise
        raise MalformedFrameError(f"JSON header lacks a valid field: {exc!r}") from None


def _int32(value) -> int:
    """A header number (a JSON integer, or its text as some clients send) that fits RocketMQ's int fields."""
    if type(value) is int:  # the usual case
        number = value
    elif type(value) is str:
        number = int(value)
    elif type(value) is float and value.is_integer():  # 10.0; not inf (1e400), not nan
        number = int(value)
    else:  # fractions, booleans, objects: not a header number
        raise ValueError(f"{value!r} is not an integer")
    if not _INT32_MIN <= number <= _INT32_MAX:
        raise ValueError(f"{number} is outside int32")
    return number


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    parts = [
        _BIN_FIXED.pack(_to_int16(cmd.code), _LANGUAGE_CODE.get(cmd.language, 7), cmd.version, cmd.opaque, cmd.flag)
    ]
    remark = (cmd.remark or "").encode()
    parts.append(_INT32.pack(len(remark)) + remark if cmd.remark is not None else _INT32.pack(0))
    ext = bytearray()
    for key, value in cmd.ext_fields.items():
        k, v = key.encode(), value.encode()
        ext += struct.pack(">h", len(k)) + k + _INT32.pack(len(v)) + v
    parts.append(_INT32.pack(len(ext)) + bytes(ext))
    return b"".join(parts)


def _to_int16(code: int) -> int:
    # Codes above int16 (the POP codes) travel as their int16 truncation, which codes.INT16_ALIASES undoes.
    return ((code + 0x8000) & 0xFFFF) - 0x8000


def _decode_binary_header(header: bytes) -> RemotingCommand:
    try:
        code, language, version, opaque, flag = _BIN_FIXED.unpack_from(header, 0)
        pos = _BIN_FIXED.size
        (remark_len,) = _INT32.unpack_from(header, pos)
        pos += 4
        if remark_len < 0 or pos + remark_len > len(header):
            raise MalformedFrameError("remark length out of range")
        remark = header[pos : pos + remark_len].decode() if remark_len else None
        pos += remark_len
        (ext_len,) = _INT32.unpack_from(header, pos)
        pos += 4
        end = pos + ext_len
        if ext_len < 0 or end > len(header):
            raise MalformedFrameError("ext fields length out of range")
        ext: dict[str, str] = {}
        while pos < end:
            (klen,) = struct.unpack_from(">h", header, pos)
            pos += 2
            key = header[pos : pos + klen].decode()
            pos += klen
            (vlen,) = _INT32.unpack_from(header, pos)
            pos += 4
            if klen < 0 or vlen < 0 or pos + vlen > end:
                raise MalformedFrameError("ext field entry out of range")
            ext[key] = header[pos : pos + vlen].decode()
            pos += vlen
    except (struct.error, UnicodeDecodeError) as exc:
        raise MalformedFrameError(f"binary header does not parse: {exc}") from None
    lang = _LANGUAGES[language] if 0 <= language < len(_LANGUAGES) else "OTHER"
    return RemotingCommand(
        code=code & 0xFFFF if code < 0 else code,
        ext_fields=ext,
        opaque=opaque,
        flag=flag,
        remark=remark,
        language=lang,
        version=version,
    )
