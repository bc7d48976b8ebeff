"""The index hot-swap experiment (the paper's §4.5): its settings and run, the judge of an answer,
the results, the shared store of rows, and the comparison across stacks."""

from rag_core.index_swap import judge, results, stack_comparison, store
from rag_core.index_swap.run import experiment_of, run_experiment

__all__ = ["experiment_of", "judge", "results", "run_experiment", "stack_comparison", "store"]
