"""Typed request headers: each request's ``extFields`` declared once, built by senders and parsed by servers.

A header class lists its fields as class attributes built by the field functions below (``int32``, ``int64``,
``boolean``, ``text``, ``topic_name``, ``group_name``, ``choice``); ``Header.parse(ext_fields)`` returns an instance
whose attributes hold the values, or raises ``BadRequestError`` (INVALID_PARAMETER) with a remark naming the
field. Handlers read those attributes and never the raw strings, so every field of a served request is checked
in one place, before any work is done.

A sender sends ``Header.ext_fields(topic="t", queue_id=0)``: the fields given by attribute name (a required
field must be), as the wire has them, in declaration order. A field left out (or None) is not sent, and the
server reads its default.

Values are read leniently, as unmodified 4.x clients send them: JSON strings, numbers or booleans all arrive as
text; integers also as ``"3.0"``, booleans as ``true/false/1/0`` in any case; a blank value counts as absent.
Integers are range-checked as RocketMQ's Java types (``int32``: Integer, ``int64``: Long) and, where a
negative value means nothing, from 0; strings are bounded and free of control characters; enum fields accept
their names only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from pocketmq.common.errors import BadRequestError, IllegalTopicError
from pocketmq.common.topic import (
    GROUP_MAX_LENGTH,
    NAME_PATTERN,
    TOPIC_MAX_LENGTH,
    group_name_problem,
    topic_name_problem,
)

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
TEXT_MAX_CHARS = 1024  # a free-text field's default bound (client ids, keys, tag expressions)

REQUIRED: Any = object()
_INTEGER_KINDS = ("int32", "int64")


def lenient_int(raw: str, name: str) -> int:
    """``raw`` as an integer: ``"7"``, ``" 7 "`` and ``"7.0"`` alike; BadRequestError naming ``name`` otherwise."""
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        as_float = float(raw)
    except ValueError:
        raise BadRequestError(f"header field {name}={_shown(raw)} is not an integer") from None
    if not as_float.is_integer():  # also inf and nan
        raise BadRequestError(f"header field {name}={_shown(raw)} is not an integer")
    return int(as_float)


def lenient_bool(raw: str, name: str) -> bool:
    text = raw.strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0", ""):
        return False
    raise BadRequestError(f"header field {name}={_shown(raw)} is not a boolean")


_CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f]")


def has_control_character(text: str) -> bool:
    """True when ``text`` holds an ISO control character (U+0000-U+001F, U+007F-U+009F), as Java's
    ``CharMatcher.javaIsoControl``: they would corrupt RocketMQ's \\x01/\\x02 property encoding or a log line."""
    return _CONTROL_CHARACTER.search(text) is not None


def _shown(raw: str, limit: int = 64) -> str:
    """``raw`` for a remark: quoted, and cut so a megabyte of garbage does not come back in the reply."""
    return repr(raw if len(raw) <= limit else raw[:limit] + "...")


class Field:
    """One header field: its wire name, its parser (text -> checked value), its default and what it accepts.

    ``name`` is the field's name in remarks (a V2 send header's ``b`` is reported as ``topic (b)``); ``kind``,
    ``low``, ``high``, ``max_chars`` and ``choices`` describe the accepted values for docs and the fuzzer."""

    __slots__ = ("wire", "name", "parse", "default", "kind", "low", "high", "max_chars", "choices", "control_ok")

    def __init__(
        self,
        wire: str,
        parse: Callable[[str, str], Any],
        default: Any,
        kind: str,
        *,
        low: int | None = None,
        high: int | None = None,
        max_chars: int | None = None,
        choices: tuple[str, ...] = (),
        name: str | None = None,
    ):
        self.wire = wire
        self.name = name or wire
        self.parse = parse
        self.default = default
        self.kind = kind
        self.low, self.high, self.max_chars, self.choices = low, high, max_chars, choices
        self.control_ok = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def read(self, fields: Mapping[str, str]) -> Any:
        raw = fields.get(self.wire)
        return self.absent() if raw is None else self.read_raw(raw)

    def absent(self) -> Any:
        if self.default is REQUIRED:
            raise BadRequestError(f"header field {self.name} is missing")
        return self.default

    def read_raw(self, raw: str) -> Any:
        """The value of present text ``raw``; blank counts as absent."""
        if raw == "" or (self.kind in _INTEGER_KINDS and not raw.strip()):
            return self.absent()
        return self.parse(raw, self.name)

    def narrowed(self, high: int, default: Any = REQUIRED) -> Any:
        """This integer field accepting values up to ``high`` only, and ``default`` when absent: a server's own
        bound on a field the protocol leaves open."""
        if self.kind not in _INTEGER_KINDS or self.low is None or self.high is None:
            raise TypeError(f"header field {self.name} is not an integer field")
        field = _integer(self.wire, self.kind, self.low, min(high, self.high), default)
        field.name = self.name
        return field

    def renamed(self, wire: str) -> Field:
        """This field under another wire name; remarks name both."""
        field = Field(
            wire,
            self.parse,
            self.default,
            self.kind,
            low=self.low,
            high=self.high,
            max_chars=self.max_chars,
            choices=self.choices,
            name=f"{self.name} ({wire})",
        )
        field.control_ok = self.control_ok
        return field


def _integer(wire: str, kind: str, low: int, high: int, default: Any) -> Any:
    def parse(raw: str, name: str) -> int:
        try:
            value = int(raw)  # the usual case first: a plain integer
        except ValueError:
            value = lenient_int(raw, name)
        if value < low or value > high:
            raise BadRequestError(f"header field {name}={_shown(raw)} is outside [{low}, {high}]")
        return value

    return Field(wire, parse, default, kind, low=low, high=high)


def int32(wire: str, default: Any = REQUIRED, *, low: int = INT32_MIN, high: int = INT32_MAX) -> Any:
    """A Java Integer field, within [``low``, ``high``]."""
    return _integer(wire, "int32", max(low, INT32_MIN), min(high, INT32_MAX), default)


def int64(wire: str, default: Any = REQUIRED, *, low: int = INT64_MIN, high: int = INT64_MAX) -> Any:
    """A Java Long field, within [``low``, ``high``]."""
    return _integer(wire, "int64", max(low, INT64_MIN), min(high, INT64_MAX), default)


def boolean(wire: str, default: bool = False) -> Any:
    return Field(wire, lenient_bool, default, "bool")


def text(wire: str, default: Any = REQUIRED, *, max_chars: int = TEXT_MAX_CHARS, control_ok: bool = False) -> Any:
    """A string of at most ``max_chars`` characters, without control characters unless ``control_ok`` (the
    send's properties field, which separates its pairs by \\x01 and \\x02)."""

    def parse(raw: str, name: str) -> str:
        if len(raw) > max_chars:
            raise BadRequestError(f"header field {name} is {len(raw)} characters long, more than {max_chars}")
        if not control_ok and has_control_character(raw):
            raise BadRequestError(f"header field {name}={_shown(raw)} holds a control character")
        return raw

    field = Field(wire, parse, default, "text", max_chars=max_chars)
    field.control_ok = control_ok
    return field


def _topic(raw: str, name: str) -> str:
    problem = topic_name_problem(raw)
    if problem:
        raise IllegalTopicError(f"header field {name}: {problem}")
    return raw


def _group(raw: str, name: str) -> str:
    problem = group_name_problem(raw)
    if problem:
        raise BadRequestError(f"header field {name}: {problem}")
    return raw


def topic_name(wire: str = "topic", default: Any = REQUIRED) -> Any:
    """A legal topic name (``common.topic``: full match of its charset, at most 127 characters)."""
    return Field(wire, _topic, default, "topic", max_chars=TOPIC_MAX_LENGTH)


def group_name(wire: str = "consumerGroup", default: Any = REQUIRED) -> Any:
    """A legal group name (at most 255 characters of the topic charset)."""
    return Field(wire, _group, default, "group", max_chars=GROUP_MAX_LENGTH)


def choice(wire: str, choices: tuple[str, ...], default: Any = REQUIRED) -> Any:
    """One of ``choices``, case-insensitively (the value is the choice as declared)."""
    by_upper = {c.upper(): c for c in choices}

    def parse(raw: str, name: str) -> str:
        value = by_upper.get(raw.upper()) if raw.isascii() else None
        if value is None:
            raise BadRequestError(f"header field {name}={_shown(raw)} is not one of {'|'.join(choices)}")
        return value

    return Field(wire, parse, default, "choice", choices=choices)


class RequestHeader:
    """Base of the typed headers. Subclasses declare fields as class attributes; ``parse`` fills an instance from
    received ``extFields``, ``ext_fields`` builds the ``extFields`` to send.

    ``FIELDS`` lists (attribute, Field) in declaration order, inherited fields first. ``parse`` and ``ext_fields``
    are compiled per class into straight-line code (as dataclasses builds ``__init__``): a send header has
    fourteen fields, and a generic loop over them cost ~3 µs per message where this costs about what the untyped
    reads (and the dict literals senders built) did."""

    FIELDS: ClassVar[tuple[tuple[str, Field], ...]] = ()

    def __init_subclass__(
        cls, wire_names: Mapping[str, str] | None = None, first: tuple[str, ...] = (), **kwargs: Any
    ) -> None:
        """``wire_names`` (long name -> short): the subclass reads and sends the inherited fields under other
        wire names (``class V2(Header, wire_names={"topic": "b"})``). ``first`` (attribute names): these fields
        go out first, in this order, then the others in declaration order, for a sender whose wire order mixes
        inherited and own fields (``class Pull(Named, first=("name", "id"))``)."""
        super().__init_subclass__(**kwargs)
        renames = wire_names or {}
        fields = {attr: f.renamed(renames[f.wire]) if f.wire in renames else f for attr, f in cls.FIELDS}
        fields.update((attr, f) for attr, f in vars(cls).items() if isinstance(f, Field))
        ordered = {attr: fields.pop(attr) for attr in first}
        cls.FIELDS = tuple({**ordered, **fields}.items())
        # mypy does not let a class replace a method it inherits; the compiled ones have the declared signatures.
        cls.parse = staticmethod(_compile_parser(cls))  # type: ignore[method-assign]
        cls.ext_fields = staticmethod(_compile_builder(cls))  # type: ignore[method-assign]

    @staticmethod
    def parse(ext_fields: Mapping[str, str], /) -> Any:
        """The header of ``ext_fields``; BadRequestError naming the first field that is missing or wrong."""
        raise NotImplementedError  # replaced per subclass

    @staticmethod
    def ext_fields(**values: Any) -> dict[str, str]:
        """The ``extFields`` of a request with ``values`` (by attribute name): wire name -> text (integers in
        decimal, booleans ``true``/``false``) of each value that is not None, in declaration order; TypeError
        for a required field left out or a name the header does not have."""
        raise NotImplementedError  # replaced per subclass

    @classmethod
    def field(cls, attr: str) -> Field:
        """The declaration of field ``attr`` (to derive another header's from it)."""
        return dict(cls.FIELDS)[attr]

    def __repr__(self) -> str:
        values = ", ".join(f"{attr}={getattr(self, attr)!r}" for attr, _ in self.FIELDS)
        return f"{type(self).__name__}({values})"


def _compile_builder(cls: type[RequestHeader]) -> Callable[..., dict[str, str]]:
    """``cls.ext_fields`` as one function of keyword-only parameters (a required field's without default, the
    others None): per field a None check and, for integers and booleans, the text."""
    fields = cls.FIELDS
    params = ", ".join(attr if f.required else f"{attr}=None" for attr, f in fields)
    lines = [f"def ext_fields(*, {params}):" if fields else "def ext_fields():", "    wire_fields = {}"]
    for attr, f in fields:
        if f.kind in _INTEGER_KINDS:
            text = f"str({attr})"
        elif f.kind == "bool":
            text = f"'true' if {attr} else 'false'"
        else:
            text = attr
        lines += [f"    if {attr} is not None:", f"        wire_fields[{f.wire!r}] = {text}"]
    lines += ["    return wire_fields"]
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)
    return namespace["ext_fields"]


def _compile_parser(cls: type[RequestHeader]) -> Callable[[Mapping[str, str]], Any]:
    """``cls.parse`` as one function: per field a dict lookup and, in the usual case (a plain integer in range,
    a boolean spelled true/false, text within its bounds), no call beyond ``int()``; anything else goes to the
    field's own ``read_raw``, which gives the value or the error."""
    namespace: dict[str, Any] = {
        "new": object.__new__,
        "cls": cls,
        "has_control": _CONTROL_CHARACTER.search,
        "legal_name": NAME_PATTERN.fullmatch,
    }
    lines = ["def parse(fields):", "    get = fields.get"]
    for i, (_attr, f) in enumerate(cls.FIELDS):
        namespace[f"f{i}"] = f
        value = f"v{i}"
        lines += [f"    raw = get({f.wire!r})", "    if raw is None:", f"        {value} = f{i}.absent()", "    else:"]
        if f.kind in _INTEGER_KINDS:
            lines += [
                "        try:",
                f"            {value} = int(raw)",
                "        except ValueError:",
                f"            {value} = f{i}.read_raw(raw)",
                "        else:",
                f"            if {value} < {f.low} or {value} > {f.high}:",
                f"                {value} = f{i}.read_raw(raw)",
            ]
        elif f.kind == "bool":
            lines += [f"        {value} = True if raw == 'true' else False if raw == 'false' else f{i}.read_raw(raw)"]
        elif f.kind == "text":
            unusual = f"raw == '' or len(raw) > {f.max_chars}" + ("" if f.control_ok else " or has_control(raw)")
            lines += [f"        {value} = f{i}.read_raw(raw) if {unusual} else raw"]
        elif f.kind in ("topic", "group"):
            lines += [f"        {value} = raw if len(raw) <= {f.max_chars} and legal_name(raw) else f{i}.read_raw(raw)"]
        else:
            lines += [f"        {value} = f{i}.read_raw(raw)"]
    values = ", ".join(f"{attr!r}: v{i}" for i, (attr, _) in enumerate(cls.FIELDS))
    lines += ["    header = new(cls)", f"    header.__dict__ = {{{values}}}", "    return header"]
    exec("\n".join(lines), namespace)
    return namespace["parse"]
