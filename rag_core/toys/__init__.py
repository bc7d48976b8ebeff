"""Hand-made models: the toy examples, the By hand page's numbers, and tiny random models for tests
and benches.
"""
