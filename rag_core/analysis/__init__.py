"""What the product concludes from traces: answer matching, teacher-forced scores, verdicts,
counterfactuals, and eval runs. Everything here reads the pipeline's traces; nothing below imports it."""
