"""A prompt another system logged, read by our causal generator as it was sent: chat messages rendered
with the generator's own chat template, and an answer's tokens as the model would write them after
that prompt.

A logged prompt is a `corpus.Prompted`; `CausalGenerator.prepare_rows` reads its text verbatim.
A leading space joins the answer to a prompt that ends in a word ("Answer:"), none to one that ends
in a space or a line break (a chat template's turn). The answer ends where the model would end it:
at a line break, or at its end-of-text token.
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


def reply_endings(gen: CausalGenerator, prompt: Prompted, text: str) -> list[list[int]]:
    """Token ids of the answer `text` after the logged prompt, once with each end token the
    generator stops at: the line break every answer of the product ends with, and the model's own
    end-of-text token (a chat model's end of turn), where it has one. The replay scores each and
    keeps the ending the model prefers."""
    lead = "" if not prompt.text or prompt.text[-1].isspace() else " "
    ids = gen.tokenizer.encode(lead + text.strip(), add_special_tokens=False)
    ends = [gen.newline_id] + [
        e for e in [gen.tokenizer.eos_token_id] if e is not None and e != gen.newline_id
    ]
    return [ids + [int(e)] for e in ends]
