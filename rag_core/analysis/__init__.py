"""What the product concludes from traces, in three parts by what each answers: `attribution`
(where an answer came from), `diagnosis` (why it is wrong, when not to trust it) and `evaluation`
(how well a stack answers a question file), over two shared modules: `matching` (exact match and
the answer in a passage) and `scoring` (answers teacher-forced under every passage)."""
