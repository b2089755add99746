"""A fault harness with real processes (docs/chaos.md): a name server and two SYNC broker groups behind a
TCP proxy, SDK and official-client traffic, a seeded schedule of faults, and checkers of what must hold."""
