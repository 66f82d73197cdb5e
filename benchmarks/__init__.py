"""Benchmarks run by scripts/bench. Each prints its figures and a baseline from the same run."""
