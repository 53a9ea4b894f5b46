"""Engine and HTTP Provider throughput, latency and memory benchmark (see ``run.py``)."""
