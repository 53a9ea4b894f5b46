"""End-to-end benchmark: recipients through the standalone Service versus the embedded SDK (see ``run.py``)."""
