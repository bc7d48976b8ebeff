"""Training RAG end to end, as the paper does: the query encoder through the prior p(z|x) (document
encoder and index frozen), the generator through LoRA adapters, or both; no passage labels.

`gradient` is the math (pure, log space); `query` and `conditionals` are the differentiable twins
of the encoder's and the generator's inference passes; `loop` is the training loop, with its
`checkpoint` and its `output` folder; `heldout` measures a held-out question file before and after.
"""
