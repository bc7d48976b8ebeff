"""The Token vs Sequence page's step-by-step views."""
