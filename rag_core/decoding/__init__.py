"""Decoding under both RAG marginals: the search itself, the batched decoders, answers as traces,
and the step-by-step view.
"""
