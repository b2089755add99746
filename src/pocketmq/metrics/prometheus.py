"""The Prometheus text exposition format (version 0.0.4) of a ``MetricsRegistry``, for operators' scrapers.

Per family a ``# HELP`` and a ``# TYPE`` line, then one line per sample: ``name{label="value",...} value``.
Label values escape ``\\``, ``"`` and newlines; HELP text escapes ``\\`` and newlines; whole numbers print
without a fraction, infinities as ``+Inf`` / ``-Inf``.
"""

from __future__ import annotations

import math

from pocketmq.metrics.registry import MetricsRegistry

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def render_text(registry: MetricsRegistry) -> str:
    lines = []
    for family in registry.collect():
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for sample in family.samples:
            labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sample.labels.items())
            lines.append(
                f"{family.name}{sample.suffix}{'{' + labels + '}' if labels else ''} {format_value(sample.value)}"
            )
    return "\n".join(lines) + "\n" if lines else ""


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
