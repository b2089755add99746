"""Broker services, each a pure core plus an async shell, behind the ``Broker`` facade (``broker.broker``)."""
