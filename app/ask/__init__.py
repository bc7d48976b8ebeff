"""The Ask page's parts: the comparison with another stack, the Diagnose panel and its counterfactuals."""
