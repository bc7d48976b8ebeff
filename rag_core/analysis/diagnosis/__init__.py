"""Why an answer is wrong and when not to trust it: the verdicts and their checks, the deeper search,
counterfactuals, the low-confidence rule and the report of every check of one answer."""
