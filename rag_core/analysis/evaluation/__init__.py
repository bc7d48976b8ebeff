"""How well a stack answers a question file: eval runs (resumable, saved), their summaries, retrieval
metrics, calibration, two runs compared, the rule choice, and sweeps over stored traces."""
