"""The index hot-swap experiment (the paper's §4.5): `judge` names holders, `results` holds the
tables and findings, `cache` the keys, the resumable cache and the shipped run, `run` the run."""
