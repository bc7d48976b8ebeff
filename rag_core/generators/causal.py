"""A causal LM generator (default: SmolLM2-135M-Instruct) reading a few-shot prompt per passage.

Every prompt starts with the same few-shot part (~80% of its tokens): its keys/values are computed
once per process and shared by all rows of all questions, read by every attention call and never
copied per row (shared_prefix.py). Each row's own tokens (question, passage) are left-padded after
that shared part so every row ends at the same position; positions skip the padding, so it changes
nothing. The prompt forward fills a key/value cache of the rows' own tokens that decoding and
rescoring reuse: a new token costs one position per row.

The few-shot prompt teaches the small model to copy a short span from the passage. The closed-book
prompt has the same shape without passages, so "what the model knows by itself" is comparable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from rag_core.config import MAX_PASSAGE_WORDS
from rag_core.corpus import Passage, Prompted, Reading, Stuffed
from rag_core.generators.base import (
    ForwardCounter,
    GenState,
    PackedAnswers,
    forced_ids,
    question_end,
    rows_of,
    too_long,
)
from rag_core.generators.shared_prefix import as_cache, causal_mask, install
from rag_core.generators.shared_rows import score_rows_after, shared_prefix_length
from rag_core.models.sources import TOKENIZER_LOCK

# Worked examples the prompt shows before the real question. Written for this prompt; none of them
# is about a question in the shipped dev set (assets/eval/dev.jsonl). Each one is built against a
# failure the small model showed on real passages: a passage with a second, tempting entity of the
# same kind (Queen Elizabeth II / Jørn Utzon, Masaru Ibuka / Sony, 1942 / 1928, 23% / 1,642), an
# answer that is not the subject of the question (the model likes to echo the question's own
# entity), a city where the passage also names the country, and a title of a work asked for
# through its author. Chosen on the dev set with the top passage alone: these six shots read
# 89/143 answers right, three generic ones (Kilimanjaro, Starry Night, penicillin) 70/143.
# The seventh, an office whose article names earlier holders beside the current one, was chosen on
# the index-swap experiment's tuning half only (RAG-Token matched 50% -> 67% on the 2016 index and
# 45% -> 54% on the 2018 one; RAG-Sequence 60% -> 65% and 55% -> 58%). The IOC is not a position
# of assets/leaders.csv (its president did not change between the two dates). No dev or test answer
# stands in the prompt (tests/test_training_data.py checks it): the Opera House's country and the
# film's director are not named, which the figures above (measured with them named) do not reflect.
FEW_SHOT = [
    (
        "Sydney Opera House",
        "The Sydney Opera House is a performing arts centre on Bennelong Point in Sydney Harbour. "
        "It was designed by the Danish architect Jørn Utzon and formally opened by Queen Elizabeth II "
        "in 1973.",
        "Who designed the Sydney Opera House?",
        "Jørn Utzon",
    ),
    (
        "Walkman",
        "The Walkman is a brand of portable cassette players first sold in Japan in 1979. "
        "It was developed by the electronics company Sony, whose co-founder Masaru Ibuka wanted to "
        "listen to music on long flights.",
        "Which company developed the Walkman?",
        "Sony",
    ),
    (
        "Angkor Wat",
        "Angkor Wat is a temple complex in Cambodia, built in the 12th century by the Khmer king "
        "Suryavarman II. It lies 5.5 kilometres north of the modern city of Siem Reap.",
        "Near which city is Angkor Wat?",
        "Siem Reap",
    ),
    (
        "Penicillin",
        "Penicillin was discovered in 1928 by the Scottish scientist Alexander Fleming at "
        "St Mary's Hospital in London. It was first mass-produced in 1942 to treat wounded soldiers.",
        "In what year was penicillin discovered?",
        "1928",
    ),
    (
        "Lake Baikal",
        "Lake Baikal is a rift lake in Siberia, Russia. It is the deepest lake in the world, "
        "reaching 1,642 metres, and holds about 23% of the world's fresh surface water.",
        "How deep is Lake Baikal in metres?",
        "1,642",
    ),
    (
        "Apocalypse Now",
        "Apocalypse Now is a 1979 American war film starring Marlon Brando and Martin Sheen. Its "
        "story was inspired by Joseph Conrad's 1899 novella Heart of Darkness, moved from the Congo "
        "to the Vietnam War.",
        "Which 1899 novella by Joseph Conrad inspired the film Apocalypse Now?",
        "Heart of Darkness",
    ),
    (
        "President of the International Olympic Committee",
        "The President of the International Olympic Committee heads the IOC and is elected by its "
        "members for an eight-year term. Juan Antonio Samaranch led it from 1980 to 2001 and was "
        "followed by Jacques Rogge. Thomas Bach, a former Olympic fencer from Germany, has been "
        "president since September 2013.",
        "Who is the President of the International Olympic Committee?",
        "Thomas Bach",
    ),
]
INSTRUCTION = "Answer each question with a short phrase copied from the passage."
CLOSED_INSTRUCTION = "Answer each question with a short phrase."

# The two ways a causal generator is prompted. "few-shot": the packaged model as shipped, steered by
# the worked examples above. "plain": a model fine-tuned for RAG (the product's default), which has
# learnt the answer format and reads only the instruction line, the question and the passage, so
# its prompt is ~5x shorter. A model folder says it wants the plain prompt in PROMPT_FILE.
FEW_SHOT_STYLE = "few-shot"
PLAIN_STYLE = "plain"
PROMPT_STYLES = (FEW_SHOT_STYLE, PLAIN_STYLE)
PROMPT_FILE = "rag_loupe_prompt.json"  # {"style": "plain"} in a generator folder trained on that prompt


def clean_question(question: str) -> str:
    return question_end(re.sub(r"\s+", " ", question).strip())  # its end: where the question is


def rag_prefix(style: str = FEW_SHOT_STYLE) -> str:
    """The part of every RAG prompt that does not depend on the question or the passage."""
    if style == PLAIN_STYLE:
        return f"{INSTRUCTION}\n\n"
    shots = "".join(
        f"Question: {q}\nPassage: {t}: {p}\nQuestion: {q}\nAnswer: {a}\n\n" for t, p, q, a in FEW_SHOT
    )
    return f"{INSTRUCTION}\n\n{shots}"


def closed_book_prefix(style: str = FEW_SHOT_STYLE) -> str:
    if style == PLAIN_STYLE:
        return f"{CLOSED_INSTRUCTION}\n\n"
    shots = "".join(f"Question: {q}\nAnswer: {a}\n\n" for _, _, q, a in FEW_SHOT)
    return f"{CLOSED_INSTRUCTION}\n\n{shots}"


def rag_prompt(question: str, passage: Passage | Reading, style: str = FEW_SHOT_STYLE) -> str:
    """The question comes before the passage and again after it: read with the question in mind, the
    small model copies the holder a passage names as current rather than the last name it read
    (the untrained base on the first 40 world-leader positions: 2016 index 80% -> 90%, 2018 index
    48% -> 57%; dev set EM 61% -> 60%, within noise). That choice predates the tuning/held-out split
    of the positions: 21 of those 40 are held out now (docs/results.md, "What each choice saw")."""
    if isinstance(passage, Prompted):  # a logged prompt is read verbatim: it holds its question
        return passage.text
    q = clean_question(question)
    return f"{rag_prefix(style)}Question: {q}\n{passage_lines(passage)}Question: {q}\nAnswer:"


def passage_lines(passage: Passage | Stuffed) -> str:
    """The "Passage: title: text" lines, one per passage: the stuffed reading formats each of its
    passages as a single passage is formatted, in its order (none: no line).

    >>> passage_lines(Stuffed((Passage("a", "A", "x y"), Passage("b", "B", "z"))))
    'Passage: A: x y\\nPassage: B: z\\n'
    """
    parts = passage.passages if isinstance(passage, Stuffed) else (passage,)
    return "".join(f"Passage: {p.title}: {' '.join(p.text.split()[:MAX_PASSAGE_WORDS])}\n" for p in parts)


def closed_book_prompt(question: str, style: str = FEW_SHOT_STYLE) -> str:
    return f"{closed_book_prefix(style)}Question: {clean_question(question)}\nAnswer:"


def newline_tokens(tokenizer) -> set[int]:
    """Ids of every token whose text contains a line break (byte-level BPE writes it as "Ċ")."""
    vocab = tokenizer.get_vocab()
    found = {i for tok, i in vocab.items() if "Ċ" in tok or "\n" in tok}
    return found or {tokenizer.encode("\n", add_special_tokens=False)[-1]}


class CausalGenerator:
    def __init__(
        self, model, tokenizer, model_id: str, device: torch.device, prompt_style: str = FEW_SHOT_STYLE
    ):
        if prompt_style not in PROMPT_STYLES:
            raise ValueError(f"unknown prompt style {prompt_style!r}")
        self.id = model_id
        self.prompt_style = prompt_style
        self.model = model
        self.max_positions = int(getattr(model.config, "max_position_embeddings", 1 << 30))
        install(model)  # attention that reads the shared few-shot prefix without copying it per row
        self.tokenizer = tokenizer
        self.device = device
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        nl = newline_tokens(tokenizer)
        eos = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
        # An answer ends at the end of its line; every token containing a newline ends it.
        self.eos_ids = frozenset(eos | set(nl))
        self.newline_id = tokenizer.encode("\n", add_special_tokens=False)[-1]
        self.pad_id = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
        )
        self.forced_bos_id, self.forced_eos_ids = forced_ids(model.generation_config, encoder_decoder=False)

    # -- the forward pass, with our own (immutable) cache: a tuple of (keys, values) per layer
    def _forward(
        self,
        input_ids: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor,
        cache,
        last_only: bool = False,
        prefix=None,
        keep: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple]:
        """Log-probs (R, L or 1, V) and the rows' new cache. `cache`: the rows' own keys/values so
        far, or None; `prefix`: the shared few-shot part's keys/values (one row, never copied, see
        shared_prefix.py), or None; `mask`: 4-D (R, 1, L, prefix + cache + L), or 2-D over the same
        columns. `last_only`: compute logits for the last position only (a prompt pass needs no
        more; the full (R, L, V) logits of a 500-token prompt are ~100 MB per row); `keep`: the
        positions whose logits are computed, (N,), instead."""
        ForwardCounter.tick()
        if mask.dim() == 2:
            mask = causal_mask(mask, input_ids.shape[1])  # (R, 1, L, prefix + cache + L)
        out = self.model(
            input_ids=input_ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=positions.to(self.device),
            cache=as_cache(cache),
            use_cache=True,
            logits_to_keep=keep if keep is not None else (1 if last_only else 0),
            shared_prefix=prefix,
        )
        new_cache = tuple((layer.keys, layer.values) for layer in out.cache.layers)
        return torch.log_softmax(out.logits.float(), dim=-1).cpu(), new_cache  # (R, L or 1, V)

    def _prefix_cache(self, ids: tuple[int, ...]) -> tuple:
        """Keys/values of the few-shot prefix (1 row), computed once per process and reused by every
        question: the prefix is most of each prompt's tokens."""
        store = self.__dict__.setdefault("_prefix_store", {})
        if ids not in store:
            if len(store) >= 4:  # a handful of prefixes at most (RAG, closed-book, a boundary split)
                store.pop(next(iter(store)))
            t = torch.tensor([ids])  # (1, P)
            _, store[ids] = self._forward(
                t, torch.ones_like(t), torch.arange(len(ids)).unsqueeze(0), None, True
            )
        return store[ids]

    def _tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        with TOKENIZER_LOCK:  # fast tokenizers must not be used from two threads at once
            return [self.tokenizer.encode(t, add_special_tokens=False) for t in texts]

    def prepare(self, question: str, passages: Sequence[Passage] | None) -> GenState:
        return self.prepare_rows(rows_of(question, passages))

    @torch.inference_mode()
    def prepare_rows(self, rows: Sequence[tuple[str, Passage | Reading | None]]) -> GenState:
        closed = [p is None for _, p in rows]
        if any(closed) and not all(closed):
            raise ValueError("closed-book and RAG rows have different few-shot parts: prepare them apart")
        if all(closed):
            prefix, prompts = (
                closed_book_prefix(self.prompt_style),
                [closed_book_prompt(q, self.prompt_style) for q, _ in rows],
            )
        else:
            prefix, prompts = (
                rag_prefix(self.prompt_style),
                [rag_prompt(q, p, self.prompt_style) for q, p in rows],
            )
        ids_of = self.__dict__.setdefault("_prefix_ids", {})  # the prefix text is fixed: tokenise it once
        if prefix not in ids_of:
            ids_of[prefix] = self._tokenize([prefix])[0]
        stuffed = sum(isinstance(p, Reading) for _, p in rows)
        prefix_ids, rows = ids_of[prefix], self._tokenize(prompts)
        too_long(max(map(len, rows)), self.max_positions, stuffed)
        n = shared_prefix_length(prefix_ids, rows)
        k, s = len(rows), max(len(r) - n for r in rows)
        # Each row = [shared prefix][left padding][its own tokens]: padding sits between the cached
        # prefix and the row's tokens, masked out, and positions skip it, so every row ends at the
        # same column and reads exactly what it would read alone.
        own = torch.full((k, s), self.pad_id, dtype=torch.long)  # (K, S)
        own_mask = torch.zeros((k, s), dtype=torch.long)  # (K, S)
        for i, r in enumerate(rows):
            own[i, s - (len(r) - n) :] = torch.tensor(r[n:])
            own_mask[i, s - (len(r) - n) :] = 1
        attn = torch.cat([torch.ones((k, n), dtype=torch.long), own_mask], dim=1)  # (K, n+S)
        positions = n + (own_mask.cumsum(-1) - 1).clamp(min=0)  # (K, S)
        prefix = self._prefix_cache(tuple(prefix_ids[:n])) if n else None  # per layer (1, H, n, D), shared
        logp, cache = self._forward(own, attn, positions, None, last_only=True, prefix=prefix)  # (K, 1, V)
        state_cache = {"kv": cache, "prefix": prefix, "attn": attn, "next_pos": positions[:, -1] + 1}
        return GenState(logp[:, -1], torch.arange(k), 0, state_cache, 1)

    @torch.inference_mode()
    def score_after(
        self,
        base_state: GenState,
        base: tuple[str, Reading],
        rows: Sequence[tuple[str, Reading]],
        answer: Sequence[int],
    ) -> torch.Tensor | None:
        """Teacher-forced log p(y_i | row, y_<i) of one answer under each row, (R, T), for rows
        that begin as the prepared row `base` does (its state): one forward (one per PACK_TOKENS of
        rows packed together). Each row reads
        the tokens it shares with `base` from base's keys/values and computes only the rest.
        Leave-one-passage-out's row z shares everything before passage z with the stuffed prompt,
        so the K rows compute about half of their tokens, and the rows' remainders and the answer
        after each sit side by side in one sequence, unpadded, behind a block-diagonal mask: a token
        sees the shared columns its row reads, and the earlier tokens of its own row, at the
        position it has alone. None when no row shares more than the few-shot part with `base`.

        The same numbers as preparing each row alone and teacher-forcing the answer, to float32
        rounding (`tests/test_stuffed.py`)."""
        base_ids, *row_ids = self._tokenize([rag_prompt(q, c, self.prompt_style) for q, c in [base, *rows]])
        too_long(max(map(len, row_ids)), self.max_positions, len(row_ids))
        return score_rows_after(self._forward, base_state, base_ids, row_ids, answer)

    def select(self, state: GenState, idx: torch.Tensor) -> GenState:
        dev_idx = idx.to(self.device)
        kv = tuple((k.index_select(0, dev_idx), v.index_select(0, dev_idx)) for k, v in state.cache["kv"])
        cache = {
            "kv": kv,
            "prefix": state.cache["prefix"],
            "attn": state.cache["attn"][idx],
            "next_pos": state.cache["next_pos"][idx],
        }
        return GenState(state.logprobs[idx], state.rows[idx], state.steps, cache, state.calls)

    @torch.inference_mode()
    def _extend(self, state: GenState, tokens: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """Feed `tokens` (R, T) after each row's cached context: log-probs (R, T, V), new cache."""
        r, t = tokens.shape
        attn = torch.cat(
            [state.cache["attn"], torch.ones((r, t), dtype=state.cache["attn"].dtype)], dim=1
        )  # (R, L+T)
        positions = state.cache["next_pos"].unsqueeze(1) + torch.arange(t)  # (R, T)
        logp, kv = self._forward(
            tokens, attn, positions, state.cache["kv"], prefix=state.cache["prefix"]
        )  # (R, T, V)
        return logp, {
            "kv": kv,
            "prefix": state.cache["prefix"],
            "attn": attn,
            "next_pos": positions[:, -1] + 1,
        }

    def advance(self, state: GenState, tokens: torch.Tensor) -> GenState:
        logp, cache = self._extend(state, tokens.view(-1, 1))  # (R, 1, V)
        return GenState(logp[:, -1], state.rows, state.steps + 1, cache, state.calls + 1)

    def teacher_force(self, state: GenState, answers: torch.Tensor) -> torch.Tensor:
        first = state.logprobs.unsqueeze(1)  # (R, 1, V): step 0 comes from the prompt pass
        if answers.shape[1] == 1:
            return first
        rest, _ = self._extend(state, answers[:, :-1])  # (R, T-1, V)
        return torch.cat([first, rest], dim=1)  # (R, T, V)

    @torch.inference_mode()
    def teacher_force_packed(self, state: GenState, packed: PackedAnswers) -> torch.Tensor:
        """Log-probs (R, L, V) after each packed input token, every answer read under every row.

        All answers sit side by side in one sequence per row behind a block-diagonal causal mask:
        an answer's token attends to the row's prompt and to the earlier tokens of its own answer
        only, at the positions it would have alone. So each row's prompt cache is read once for all
        answers and never copied (`teacher_force` on N×K rows copies the ~30 MB cache N times).
        """
        r, l = state.logprobs.shape[0], len(packed.tokens)
        prompt = state.cache["attn"].bool()  # (R, P)
        own = packed.mask()  # (L, L): same answer, not later
        mask = torch.cat(
            [prompt[:, None, None, :].expand(r, 1, l, -1), own.expand(r, 1, l, l)], dim=-1
        )  # (R, 1, L, P+L)
        positions = state.cache["next_pos"].unsqueeze(1) + packed.steps.unsqueeze(0)  # (R, L)
        logp, _ = self._forward(
            packed.tokens.expand(r, l), mask, positions, state.cache["kv"], prefix=state.cache["prefix"]
        )  # (R, L, V)
        return logp

    def encode_answer(self, text: str) -> list[int]:
        return self.tokenizer.encode(" " + text.strip(), add_special_tokens=False) + [self.newline_id]

    def decode(self, ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids if int(i) not in self.eos_ids]
        return self.tokenizer.decode(ids, skip_special_tokens=True).strip()

    def token_text(self, token_id: int) -> str:
        # a trace shows K x T x A alternative tokens: decode each id once per process
        cache = self.__dict__.setdefault("_token_texts", {})
        tid = int(token_id)
        if tid not in cache:
            cache[tid] = self.tokenizer.decode([tid])
        return cache[tid]
