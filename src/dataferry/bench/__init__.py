"""Benchmarks: the same work for each contender in one run, reported side by side."""
