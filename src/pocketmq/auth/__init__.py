"""Access control, RocketMQ's ACL 2.0 model: users, policies, request signatures and the decision.

Pure parts only here (no I/O of its own): ``signature`` (how both protocols sign a request), ``model`` (users,
resources, actions, policies and their JSON), ``decide`` (authentication and authorization of one request). The
broker keeps the users and policies durably and checks every entry point with them (docs/security.md).
"""
