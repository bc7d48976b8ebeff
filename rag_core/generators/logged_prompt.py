"""A prompt another system logged, read by our causal generator as it was sent: chat messages rendered
with the generator's own chat template, and an answer's tokens as the model would write them after
that prompt.

A logged prompt is a `corpus.Prompted`; `CausalGenerator.prepare_rows` reads its text verbatim.
After a chat prompt the answer is the assistant's turn and ends with the model's end token; after a
plain prompt it ends at the line break, as every answer of the product does. A leading space joins
the answer to a prompt that ends in a word ("Answer:"), none to one that ends in a space or line.
"""

from __future__ import annotations

from collections.abc import Sequence

from rag_core.corpus import Prompted
from rag_core.generators.causal import CausalGenerator

ROLES = {"human": "user", "ai": "assistant", "model": "assistant"}  # other tools' names for the roles


def render_chat(gen: CausalGenerator, messages: Sequence[tuple[str, str]]) -> str:
    """The messages (role, content) as the one prompt text the generator reads, ready for its turn:
    its tokenizer's chat template, or "role: content" lines when it has none."""
    turns = [{"role": ROLES.get(r.lower(), r.lower()), "content": c} for r, c in messages]
    if getattr(gen.tokenizer, "chat_template", None):
        return gen.tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
    return "".join(f"{t['role']}: {t['content']}\n" for t in turns) + "assistant:"


def encode_reply(gen: CausalGenerator, prompt: Prompted, text: str) -> list[int]:
    """Token ids of the answer `text` after the logged prompt, its end token included."""
    lead = "" if not prompt.text or prompt.text[-1].isspace() else " "
    with_end = gen.tokenizer.eos_token_id if prompt.chat else gen.newline_id
    end = gen.newline_id if with_end is None else with_end
    return gen.tokenizer.encode(lead + text.strip(), add_special_tokens=False) + [int(end)]
