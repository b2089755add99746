"""What the command line and the web console share: how messages, offsets and dead letters are read and shown
as JSON, and how operators' times are parsed. Built on the SDK's admin client (docs/console.md)."""
