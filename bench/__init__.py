"""Benchmarks: each prints figures and, as its last line, one JSON object (not part of the test run)."""
