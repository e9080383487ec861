"""Apps instrumented by real third-party libraries, run in their own virtual environments."""
