"""Request signatures, as RocketMQ's clients compute them.

**Remoting** (4.x clients, the PocketMQ SDK): the client adds ``AccessKey`` to the header's fields, signs, and
adds ``Signature``. The signed content is the *values* of every field except ``Signature`` (no keys, no
separators), ordered by key as Java's ``TreeMap<String, …>`` orders them (UTF-16 code units), in UTF-8, followed
by the raw body. ``Signature`` is the standard Base64 of HMAC-SHA1 keyed by the secret key. The broker signs again
over the fields exactly as it received them: clients written in JavaScript send numbers and booleans in JSON and
signed their own string form of them (``42``, ``true``), so that is the form used here.

**gRPC** (the official 5.x clients): metadata ``authorization: MQv2-HMAC-SHA1 Credential=<ak>,
SignedHeaders=x-mq-date-time, Signature=<hex>`` where the hex (either case) is HMAC-SHA1 keyed by the secret key
over the ``x-mq-date-time`` value. RocketMQ never compares that date with its clock, and neither does PocketMQ.

Comparisons are constant-time (``hmac.compare_digest``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

ACCESS_KEY_FIELD = "AccessKey"
SIGNATURE_FIELD = "Signature"
SECURITY_TOKEN_FIELD = "SecurityToken"
GRPC_AUTHORIZATION_KEY = "authorization"
GRPC_DATE_TIME_KEY = "x-mq-date-time"
GRPC_ALGORITHM = "MQv2-HMAC-SHA1"


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a client signs its requests with (RocketMQ's ``SessionCredentials``); the secret never in a repr."""

    access_key: str
    secret_key: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("credentials need both an access key and a secret key")

    def sign(self, fields: dict[str, Any], body: bytes | None) -> None:
        sign_remoting(fields, body, self.access_key, self.secret_key)


def credentials_or_none(access_key: str | None, secret_key: str | None) -> Credentials | None:
    """Credentials when both halves are given, None when neither is; ValueError for one without the other."""
    if not access_key and not secret_key:
        return None
    return Credentials(access_key or "", secret_key or "")


def _hmac_sha1(secret_key: str, content: bytes) -> bytes:
    return hmac.digest(secret_key.encode(), content, "sha1")  # the one-shot C path: half of hmac.new's time


def field_text(value: Any) -> str:
    """A header field's value as the signing client wrote it: booleans as ``true``/``false``, numbers in decimal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _java_key_order(key: str) -> bytes:
    return key.encode("utf-16-be")  # byte order of big-endian code units is Java's String.compareTo order


@functools.lru_cache(maxsize=1024)
def _signed_keys(keys: tuple[str, ...], left_out: frozenset[str]) -> tuple[str, ...]:
    """The keys a signature covers, in signing order. Cached: a client sends the same field names request after
    request, and sorting them was a third of the broker's cost of checking a send's signature."""
    return tuple(sorted((key for key in keys if key not in left_out), key=_java_key_order))


_SIGNATURE_ONLY = frozenset({SIGNATURE_FIELD})


def remoting_content(fields: Mapping[str, Any], body: bytes | None, *, exclude: Iterable[str] = ()) -> bytes:
    """The bytes a remoting signature covers: field values by key (``Signature`` and ``exclude`` left out), body."""
    left_out = _SIGNATURE_ONLY.union(exclude) if exclude else _SIGNATURE_ONLY
    keys = _signed_keys(tuple(fields), left_out)
    values = [fields[key] for key in keys]
    text = "".join([v if v.__class__ is str else field_text(v) for v in values])  # str: as received, the usual
    return text.encode() + body if body else text.encode()


def remoting_signature(secret_key: str, fields: Mapping[str, Any], body: bytes | None, **content_options) -> str:
    return base64.b64encode(_hmac_sha1(secret_key, remoting_content(fields, body, **content_options))).decode()


def sign_remoting(fields: dict[str, Any], body: bytes | None, access_key: str, secret_key: str) -> None:
    """Add ``AccessKey`` and ``Signature`` to a request's ``fields`` (what a client does before sending)."""
    fields[ACCESS_KEY_FIELD] = access_key
    fields[SIGNATURE_FIELD] = remoting_signature(secret_key, fields, body)


def remoting_signature_matches(
    secret_key: str, fields: Mapping[str, Any], body: bytes | None, *, exclude: Iterable[str] = ()
) -> bool:
    """Whether the request's ``Signature`` is the one ``secret_key`` gives over what was received."""
    claimed = fields.get(SIGNATURE_FIELD)
    if not isinstance(claimed, str):
        return False
    expected = remoting_signature(secret_key, fields, body, exclude=exclude)
    return hmac.compare_digest(claimed.encode(), expected.encode())


# -- gRPC ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GrpcCredential:
    """What an ``authorization`` header claims: who, and the HMAC-SHA1 it carries (raw bytes)."""

    access_key: str
    signature: bytes


def grpc_authorization(access_key: str, secret_key: str, date_time: str) -> str:
    """The ``authorization`` value a client sends with ``x-mq-date-time: date_time``."""
    hex_signature = _hmac_sha1(secret_key, date_time.encode()).hex().upper()
    return f"{GRPC_ALGORITHM} Credential={access_key}, SignedHeaders={GRPC_DATE_TIME_KEY}, Signature={hex_signature}"


def parse_grpc_authorization(value: str) -> GrpcCredential | None:
    """The credential of an ``authorization`` value, None when it is not one (wrong scheme, no signature, bad hex).

    As RocketMQ reads it: the scheme up to the first space, then ``key=value`` pairs split on ``,``; the access key
    is the ``Credential`` text before any ``/``; ``SignedHeaders`` is not read (only the date is ever signed)."""
    scheme, _, rest = value.strip().partition(" ")
    if scheme != GRPC_ALGORITHM:
        return None
    pairs = dict(part.strip().partition("=")[::2] for part in rest.split(",") if "=" in part)
    credential, hex_signature = pairs.get("Credential"), pairs.get("Signature")
    if credential is None or not hex_signature:
        return None
    try:
        signature = bytes.fromhex(hex_signature.strip())
    except (ValueError, binascii.Error):
        return None
    return GrpcCredential(credential.split("/", 1)[0].strip(), signature)


def grpc_signature_matches(secret_key: str, date_time: str, credential: GrpcCredential) -> bool:
    return hmac.compare_digest(credential.signature, _hmac_sha1(secret_key, date_time.encode()))
