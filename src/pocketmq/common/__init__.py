"""Value types shared by every layer: messages, queues, topic naming rules, properties."""
