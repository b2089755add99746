"""The web console (docs/console.md)."""
