"""The gRPC proxy: RocketMQ 5's cluster-mode proxy in PocketMQ's terms (docs/grpc.md, "Proxy").

``pocketmq proxy --namesrv ADDR --grpc-port P --workers N`` runs N worker processes sharing one gRPC port
(SO_REUSEPORT): each serves the official RocketMQ 5 clients (``apache.rocketmq.v2``) and speaks remoting to the
brokers through an SDK ``ClientInstance``, so gRPC's per-call cost spreads over the cores while each broker
keeps one store. A client's connection lands on one worker; the workers share nothing but the brokers.

- ``options``: the proxy's settings;
- ``sender``: SEND_MESSAGE_V2 of v2 messages (half messages too) through the SDK producer;
- ``consumer``: ReceiveMessage, AckMessage, ChangeInvisibleDuration, QueryAssignment over remoting POP;
- ``transactions``: EndTransaction over END_TRANSACTION, and the brokers' checks relayed to a client's Telemetry;
- ``groups``: the consumer groups' settings, read from the brokers and cached;
- ``users``: the brokers' users and ACLs, read and cached; ``access``: access control over them, with the
  embedded front end's checks;
- ``servicer``: the ``MessagingService`` servicer of one worker; ``worker``: one worker process;
- ``supervisor``: the parent process that reserves the port and runs the workers.
"""
