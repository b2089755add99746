"""``pocketmq_request_latency_seconds``: the remoting router's request latency per code, as a metrics source."""

from __future__ import annotations

from pocketmq.metrics import MetricsRegistry
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.transport import RequestRouter

REQUEST_LATENCY = "pocketmq_request_latency_seconds"


def expose_request_latency(router: RequestRouter, metrics: MetricsRegistry) -> None:
    metrics.add_source(
        lambda: [
            router.latency.family(
                REQUEST_LATENCY,
                "Time from a remoting request's handler call to its reply, by request code",
                _labels,
            )
        ]
    )


def _labels(code: int) -> dict[str, str]:
    try:
        name = RequestCode(code).name
    except ValueError:  # a code served without a name of its own in RequestCode
        name = str(code)
    return {"code": str(code), "request": name}
