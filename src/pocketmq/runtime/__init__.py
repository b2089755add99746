"""Seams for everything nondeterministic: clocks (and, as they are needed, filesystem, network, RNG).

Only this package reads the wall clock or sleeps; decision logic takes ``now_ms`` from here.
"""
