"""The single-writer storage engine: commit log segments, consume queues, index, recovery, retention.

The store knows records, queues and offsets; it knows nothing of groups, POP, protobuf or topics' meaning.
The public surface is ``pocketmq.store.api`` (types) and ``pocketmq.store.message_store.MessageStore``.
"""
