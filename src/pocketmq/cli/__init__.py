"""The ``pocketmq`` command: thin wrappers over the library."""
