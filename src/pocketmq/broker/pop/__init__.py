"""POP consumption: checkpoints (CK) and acks as records, receipt handles, CK rewrite backoff, revive."""
