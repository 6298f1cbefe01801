"""Benchmarks for cotal-tasks (``make bench``)."""
