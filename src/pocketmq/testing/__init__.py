"""Test doubles and harnesses shipped with the library (fake clock, real-process cluster harness)."""
