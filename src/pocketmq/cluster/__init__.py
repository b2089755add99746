"""What a broker uses of other processes: registration with the name servers and their client, replication (the
master side, epochs), typed reads from other brokers and their circuit breaker, the acting-master election,
the escape bridge."""
