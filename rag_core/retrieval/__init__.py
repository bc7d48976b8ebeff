"""Finding passages: the encoders, FAISS indexes (our own and the `datasets` format), the retriever,
the catalog of named and uploaded indexes, and the Ray build.
"""
