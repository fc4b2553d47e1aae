"""The benchmark scripts, each run from the repository root as ``python -m benchmarks.NAME``."""
