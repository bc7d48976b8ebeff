"""Tiny, randomly initialised stand-ins for the paper's stack (DPR + BART), built in-process.

No download: BART's byte-level BPE is trained here on synthetic sentences and DPR's WordPiece
vocabulary is read off the same sentences; the models are initialised from a fixed seed and saved
to a folder (the same bytes on every run), so the engine can load them exactly as it loads
`facebook/dpr-*` and `facebook/bart-large`. Everything is small enough to build in about a second.

`build_tiny_stack(folder)` returns the paths:
    dpr_q, dpr_ctx   DPRQuestionEncoder / DPRContextEncoder with their WordPiece tokenizers
    bart             BartForConditionalGeneration with its byte-level BPE tokenizer
    corpus           a JSONL corpus of short passages {"title", "text"}
    questions        a few questions the corpus can answer (for the tests' convenience)
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SEED = 1234
BART_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # ids 0..4, as BART numbers them
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

PLACES = ["Paris", "Lima", "Oslo", "Cairo", "Hanoi", "Quito", "Dublin", "Nairobi", "Lisbon", "Kyoto"]
PEOPLE = [
    "Ada Lovelace",
    "Alan Turing",
    "Marie Curie",
    "Nikola Tesla",
    "Emmy Noether",
    "Carl Gauss",
    "Grace Hopper",
    "Rosalind Franklin",
    "Niels Bohr",
    "Lise Meitner",
]
THINGS = [
    "bridge",
    "library",
    "museum",
    "river",
    "tower",
    "garden",
    "observatory",
    "harbour",
    "theatre",
    "school",
]
ADJECTIVES = ["old", "famous", "large", "quiet", "green", "ancient", "modern", "small", "bright", "tall"]
VERBS = [
    "built",
    "founded",
    "designed",
    "opened",
    "painted",
    "visited",
    "named",
    "restored",
    "studied",
    "described",
]


def corpus_rows(rng: random.Random, n: int = 30) -> list[dict]:
    rows = []
    for i in range(n):
        place, person, thing = PLACES[i % 10], PEOPLE[(3 * i) % 10], THINGS[(7 * i + i // 10) % 10]
        adj, verb, year = rng.choice(ADJECTIVES), rng.choice(VERBS), rng.randint(1700, 2000)
        rows.append(
            {
                "title": f"The {adj} {thing} of {place}",
                "text": f"The {adj} {thing} of {place} was {verb} by {person} in {year}. "
                f"It stands near the {rng.choice(THINGS)} and is {rng.choice(ADJECTIVES)}.",
            }
        )
    return rows


def questions() -> list[str]:
    return [f"Who built the {t} of {p}?" for t, p in zip(THINGS[:5], PLACES[:5])] + [
        "Where is the old library?"
    ]


def sentences(rng: random.Random, rows: list[dict], n: int = 300) -> list[str]:
    """Training text for the tokenizers: the corpus, the questions and a few hundred synthetic lines."""
    out = [r["title"] for r in rows] + [r["text"] for r in rows] + questions()
    for _ in range(n):
        out.append(
            f"{rng.choice(['Who', 'When', 'Where', 'Why'])} was the {rng.choice(ADJECTIVES)} "
            f"{rng.choice(THINGS)} of {rng.choice(PLACES)} {rng.choice(VERBS)} by {rng.choice(PEOPLE)}? "
            f"In {rng.randint(1700, 2000)} / {rng.choice(PLACES)} // {rng.choice(PEOPLE)}."
        )
    return out


def bart_tokenizer(texts: list[str], vocab_size: int = 500):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import BartTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        texts, vocab_size=vocab_size, min_frequency=2, special_tokens=BART_SPECIALS, show_progress=False
    )
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return BartTokenizerFast(vocab=model["vocab"], merges=merges)


def dpr_tokenizers(texts: list[str]):
    """A WordPiece vocabulary built from the texts: every whole word, every character and its
    `##` continuation, in sorted order. (tokenizers' WordPiece trainer breaks ties differently from
    run to run, so the vocabulary, and with it every DPR score, would change between runs.)"""
    from tokenizers import normalizers, pre_tokenizers
    from transformers import DPRContextEncoderTokenizerFast, DPRQuestionEncoderTokenizerFast

    normalise, split = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    words = {w for t in texts for w, _ in split.pre_tokenize_str(normalise.normalize_str(t))}
    chars = {c for w in words for c in w}
    tokens = BERT_SPECIALS + sorted(words | chars) + sorted("##" + c for c in chars)
    vocab = {tok: i for i, tok in enumerate(dict.fromkeys(tokens))}
    return DPRQuestionEncoderTokenizerFast(vocab=dict(vocab)), DPRContextEncoderTokenizerFast(
        vocab=dict(vocab)
    )


def build_tiny_stack(folder: Path) -> dict:
    import torch
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        DPRConfig,
        DPRContextEncoder,
        DPRQuestionEncoder,
    )

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    rows = corpus_rows(rng)
    texts = sentences(rng, rows)
    paths = {name: folder / name for name in ("dpr_q", "dpr_ctx", "bart")}
    paths["corpus"] = folder / "corpus.jsonl"

    q_tok, ctx_tok = dpr_tokenizers(texts)
    bart_tok = bart_tokenizer(texts)
    torch.manual_seed(SEED)
    # initializer_range 0.2 (BERT's is 0.02): at 0.02 a random encoder's [CLS] vector hardly depends
    # on the text, every s(z) comes out the same and the prior is uniform; at 0.2 it is not.
    dpr = dict(
        vocab_size=len(q_tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        projection_dim=0,
        initializer_range=0.2,
    )
    DPRQuestionEncoder(DPRConfig(**dpr)).eval().save_pretrained(paths["dpr_q"])
    q_tok.save_pretrained(paths["dpr_q"])
    DPRContextEncoder(DPRConfig(**dpr)).eval().save_pretrained(paths["dpr_ctx"])
    ctx_tok.save_pretrained(paths["dpr_ctx"])
    # init_std well above BART's 0.02 so the random model's next-token distributions are peaked,
    # not nearly uniform: differences between passages then show in the scores the tests compare.
    bart = BartConfig(
        vocab_size=len(bart_tok),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=512,
        init_std=0.2,
        decoder_start_token_id=2,
        eos_token_id=2,
        bos_token_id=0,
        pad_token_id=1,
        forced_bos_token_id=None,
        forced_eos_token_id=2,
    )
    BartForConditionalGeneration(bart).eval().save_pretrained(paths["bart"])
    bart_tok.save_pretrained(paths["bart"])

    paths["corpus"].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    paths["questions"] = questions()
    return paths
