"""One or more examples per command, shown at the end of its ``--help`` (``pocketmq.cli.parsing``); a unit test
parses every one, so they cannot drift from the flags."""

from __future__ import annotations

# command path -> example command lines
EXAMPLES: dict[tuple[str, ...], tuple[str, ...]] = {
    ("serve",): (
        "pocketmq serve",
        "pocketmq serve --data-dir data/b --remoting-port 10921 --port 8091 --namesrv 127.0.0.1:9876",
        "pocketmq serve --config broker.conf --set file_reserved_hours=24",
    ),
    ("namesrv",): ("pocketmq namesrv --port 9876",),
    ("topic",): ("pocketmq topic create orders --queues 8", "pocketmq topic list"),
    ("topic", "create"): ("pocketmq topic create orders --queues 8 --type fifo",),
    ("topic", "update"): ("pocketmq topic update orders --queues 16",),
    ("topic", "delete"): ("pocketmq topic delete orders",),
    ("topic", "list"): ("pocketmq topic list --json",),
    ("topic", "describe"): ("pocketmq topic describe orders",),
    ("send",): (
        "pocketmq send orders --body hello --tag created --keys order-42",
        "echo '{\"id\": 42}' | pocketmq send orders --body -",
        "pocketmq send orders --file order.json --count 100 --json",
    ),
    ("message",): ("pocketmq message recall HANDLE",),
    ("message", "recall"): ("pocketmq message recall HANDLE",),
    ("tail",): ("pocketmq tail orders", "pocketmq tail orders --from-beginning --max 10 --json"),
    ("cluster",): ("pocketmq cluster", "pocketmq cluster -n 10.0.0.5:9876 --json"),
    ("group",): ("pocketmq group create billing --retry-max-times 5", "pocketmq group describe billing"),
    ("group", "create"): ("pocketmq group create billing --retry-max-times 5 --fifo",),
    ("group", "list"): ("pocketmq group list",),
    ("group", "describe"): ("pocketmq group describe billing --topic orders",),
    ("dlq",): ("pocketmq dlq list billing", "pocketmq dlq resend billing --all"),
    ("dlq", "list"): ("pocketmq dlq list billing --max 20",),
    ("dlq", "resend"): ("pocketmq dlq resend billing --id MESSAGE_ID", "pocketmq dlq resend billing --all"),
    ("transaction",): ("pocketmq transaction list", "pocketmq transaction resume --all --topic orders"),
    ("transaction", "list"): ("pocketmq transaction list --max 50",),
    ("transaction", "resume"): ("pocketmq transaction resume --id MESSAGE_ID",),
    ("retry",): ("pocketmq retry stats billing",),
    ("retry", "stats"): ("pocketmq retry stats billing --json",),
    ("config",): ("pocketmq config get", "pocketmq config set breaker_cool_down_ms 10000"),
    ("config", "set"): ("pocketmq config set breaker_cool_down_ms 10000 --broker broker-a",),
    ("config", "get"): ("pocketmq config get pop_ck_rewrite_backoff_ms",),
    ("store",): ("pocketmq store verify --data-dir data",),
    ("store", "verify"): ("pocketmq store verify --data-dir data",),
    ("tls",): ("pocketmq tls dev-cert certs",),
    ("tls", "dev-cert"): ("pocketmq tls dev-cert certs --name broker.example.internal",),
    ("completion",): ('eval "$(pocketmq completion bash)"', "pocketmq completion fish | source"),
}
