"""Lite topics (docs/lite.md): many light child topics under a LITE parent topic, indexed in memory over the
parent's queues, with per-client subscriptions and ordered per-lite-topic delivery to consumer groups."""
