"""PocketMQ: Apache RocketMQ's messaging model in Python."""

__version__ = "0.1.0"
