"""What a metric family looks like when read: its samples, the shape every exposition starts from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sample:
    """One line of a family's snapshot: ``suffix`` is "" or a histogram's ``_bucket`` / ``_sum`` / ``_count``."""

    suffix: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class FamilySnapshot:
    name: str
    kind: str  # counter | gauge | histogram
    help: str
    samples: list[Sample]


def histogram_samples(
    labels: dict[str, str], buckets: tuple[float, ...], bucket_counts: list[int], count: int, total: float
) -> list[Sample]:
    """The ``_bucket`` (cumulative, then ``+Inf``), ``_sum`` and ``_count`` samples of one histogram series;
    ``bucket_counts[i]`` counts the observations in bucket ``i`` alone (above the bound before it)."""
    samples = []
    cumulative = 0
    for bound, n in zip(buckets, bucket_counts):
        cumulative += n
        samples.append(Sample("_bucket", {**labels, "le": _bound_text(bound)}, float(cumulative)))
    samples.append(Sample("_bucket", {**labels, "le": "+Inf"}, float(count)))
    samples.append(Sample("_sum", labels, total))
    samples.append(Sample("_count", labels, float(count)))
    return samples


def _bound_text(bound: float) -> str:
    return repr(bound) if bound != int(bound) else f"{bound:.1f}"
