"""Replay: the loupe on a RAG someone else deployed. Its traces are imported (`sources`), the prompt
its model read is rebuilt with each document's span in it (`prompt_slots`), replayed exactly on a
generator of ours (`run`), and each answer is explained in the product's words (`why`)."""
