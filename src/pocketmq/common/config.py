"""Loading a component's frozen config dataclass: defaults < TOML file < ``POCKETMQ_*`` env < overrides.

Every problem is collected and reported at once, each with where the value came from; invalid values are
rejected, never clamped. Fields may carry ``metadata={"aliases": (...)}`` for RocketMQ ``broker.conf`` keys
and ``metadata={"check": callable}`` returning a problem string or None. A class may name keys it accepts and
ignores in a file (``IGNORED_KEYS``, key -> why): RocketMQ's keys that mean nothing here, so that a RocketMQ
``broker.conf`` starts, with one warning line naming them; a flag or a run-time change naming one is refused.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pocketmq.common.errors import ConfigError

log = logging.getLogger(__name__)


def load_config(
    cls: type,
    *,
    file: str | Path | None = None,
    section: str | None = None,
    env: Mapping[str, str] | None = None,
    env_prefix: str = "POCKETMQ_",
    overrides: Mapping[str, Any] | None = None,
    override_sources: Mapping[str, str] | None = None,
):
    """Build ``cls`` (a frozen dataclass) from its layered sources.

    ``file`` is TOML (a ``section`` table of it when given) or a RocketMQ-style ``key=value`` .conf/.properties
    file; env names are ``env_prefix + FIELD_NAME_UPPER``; ``overrides`` are typed values from CLI flags
    (None values are ignored, so unset flags fall through); a problem names an override's source as
    ``override_sources[key]`` (``--set foo``), else as ``option --foo``.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    problems: list[str] = []
    known_ignored: Mapping[str, str] = getattr(cls, "IGNORED_KEYS", {})
    ignored: list[str] = []  # the ignored keys the file gave

    def put(key: str, raw: Any, source: str, *, from_file: bool = False) -> None:
        name = field_name(cls, key)
        if name is None:
            if from_file and key in known_ignored:
                ignored.append(key)
            else:
                problems.append(f"{source}: unknown setting {key!r}")
            return
        try:
            values[name] = _coerce(raw, hints[name])
            sources[name] = source
        except (TypeError, ValueError) as exc:
            problems.append(f"{source}: {name}={raw!r}: {exc}")

    if file is not None:
        for key, raw in _read_file(Path(file), section, problems).items():
            put(key, raw, f"file {file}", from_file=True)
    environ = os.environ if env is None else env
    for name in fields:
        env_name = env_prefix + name.upper()
        if env_name in environ:
            put(name, environ[env_name], f"env {env_name}")
    for key, raw in (overrides or {}).items():
        if raw is not None:
            put(key, raw, (override_sources or {}).get(key) or f"option --{key.replace('_', '-')}")

    for name, value in values.items():
        check = fields[name].metadata.get("check")
        problem = check(value) if check else None
        if problem:
            problems.append(f"{sources[name]}: {name}={value!r}: {problem}")
    if problems:
        raise ConfigError("invalid configuration: " + "; ".join(problems))
    if ignored:
        notes = "; ".join(f"{key}: {known_ignored[key]}" for key in ignored)
        log.warning("file %s: RocketMQ settings PocketMQ does not use, ignored: %s", file, notes)
    return cls(**values)


def field_name(cls: type, key: str) -> str | None:
    """The field of ``cls`` that ``key`` names: the field name, a ``broker.conf`` alias (any case), or the
    name with dashes and capitals (``long-polling-enable``); None when it names none."""
    names, by_alias = _field_names(cls)
    if key in names:
        return key
    name = by_alias.get(key) or by_alias.get(key.lower())
    if name is None:
        name = key.replace("-", "_").lower()
    return name if name in names else None


@functools.cache
def _field_names(cls: type) -> tuple[frozenset[str], dict[str, str]]:
    """The field names of ``cls`` and its alias -> field name table, built once per class (``load_config``
    asks for every setting it is given)."""
    fields = dataclasses.fields(cls)
    return (
        frozenset(f.name for f in fields),
        {alias: f.name for f in fields for alias in f.metadata.get("aliases", ())},
    )


def _read_file(path: Path, section: str | None, problems: list[str]) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        problems.append(f"file {path}: cannot read: {exc.strerror}")
        return {}
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            problems.append(f"file {path}: not valid TOML: {exc}")
            return {}
        if section is not None:
            data = data.get(section, {})
        return {k: v for k, v in data.items() if not isinstance(v, dict)}
    result: dict[str, Any] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            problems.append(f"file {path}: line {line!r} is not key=value")
            continue
        result[key.strip()] = value.strip()
    return result


def _coerce(raw: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or (origin is not None and type(None) in args):
        if raw is None or (isinstance(raw, str) and raw.lower() in ("", "none", "null")):
            return None
        hint = next(a for a in args if a is not type(None))
        origin = typing.get_origin(hint)
    if hint is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise ValueError("expected true or false")
    if hint is int:
        if isinstance(raw, bool) or not _is_number(raw, int):
            raise ValueError("expected an integer")
        return int(raw)
    if hint is float:
        if isinstance(raw, bool) or not _is_number(raw, float):
            raise ValueError("expected a number")
        return float(raw)
    if hint is str:
        return str(raw)
    if origin is tuple:
        items = raw if isinstance(raw, (list, tuple)) else [p for p in str(raw).replace(",", " ").split() if p]
        return tuple(_coerce(item, args[0]) for item in items)
    if isinstance(hint, type) and issubclass(hint, Path):
        return Path(raw)
    if isinstance(hint, type) and hasattr(hint, "parse"):
        return raw if isinstance(raw, hint) else hint.parse(str(raw))
    return raw


def _is_number(raw: Any, kind: type) -> bool:
    try:
        kind(raw)
    except (TypeError, ValueError):
        return False
    return True
