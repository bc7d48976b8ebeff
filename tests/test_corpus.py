import random

import pytest

from rag_core.corpus import CorpusError, chunk_words, load_wiki, parse_corpus_bytes


def test_wiki_corpus_is_passages_of_40_to_110_words_with_no_fragment():
    ps = load_wiki()
    assert 12000 < len(ps) < 12700
    assert len({p.id for p in ps}) == len(ps)
    assert any(p.title == "Moby-Dick" and "Melville" in p.text for p in ps)
    per_article: dict[str, list[int]] = {}
    for p in ps:
        per_article.setdefault(p.title, []).append(len(p.text.split()))
    for title, lengths in per_article.items():
        if len(lengths) > 1:  # a summary over 100 words: the fewest passages, none a fragment
            assert all(40 <= n <= 110 for n in lengths), (title, lengths)
            assert len(lengths) == -(-sum(lengths) // 100), (title, lengths)
        else:
            assert lengths[0] <= 100, (title, lengths)
    tasmania = [p.text for p in ps if p.title == "Tasmania"]
    assert all(len(t.split()) >= 40 for t in tasmania), tasmania  # once "capital city." stood alone


def test_chunking_keeps_every_word_and_splits_evenly_without_sentences():
    words = [f"w{i}" for i in range(345)]
    chunks = chunk_words(" ".join(words))
    assert [len(c.split()) for c in chunks] == [86, 86, 86, 87]
    assert " ".join(chunks).split() == words


def test_chunking_cuts_at_the_nearest_sentence_end_within_reach():
    text = " ".join(["w"] * 55 + ["end."] + ["w"] * 64)  # 120 words: the even cut is at 60
    assert [len(c.split()) for c in chunk_words(text)] == [56, 64]
    initial = " ".join(["w"] * 57 + ["J."] + ["w"] * 62)  # an initial is not a sentence end
    assert [len(c.split()) for c in chunk_words(initial)] == [60, 60]
    far = " ".join(["w"] * 45 + ["end."] + ["w"] * 74)  # 14 words from the even cut: out of reach
    assert [len(c.split()) for c in chunk_words(far)] == [60, 60]


@pytest.mark.parametrize("seed", range(20))
def test_every_passage_of_a_long_text_holds_40_to_110_words(seed):
    rng = random.Random(seed)
    words = [rng.choice(["w", "w", "w", "end.", "U.S.", "x?"]) for _ in range(rng.randint(101, 2000))]
    chunks = chunk_words(" ".join(words))
    assert " ".join(chunks).split() == words
    assert len(chunks) == -(-len(words) // 100)
    assert all(40 <= len(c.split()) <= 110 for c in chunks), [len(c.split()) for c in chunks]


def test_jsonl_skips_bad_rows_and_counts_them():
    data = (
        b'{"title": "A", "text": "alpha beta"}\nnot json\n{"title": "B"}\n'
        b'{"id": "x", "title": "C", "text": "gamma"}\n'
    )
    parsed = parse_corpus_bytes("c.jsonl", data)
    assert [p.title for p in parsed.passages] == ["A", "C"]
    assert parsed.skipped == 2
    assert parsed.passages[1].id == "x"


def test_csv_and_text_uploads():
    csv_corpus = parse_corpus_bytes("c.csv", b"title,text\nOne,first text\nTwo,\n")
    assert [p.text for p in csv_corpus.passages] == ["first text"] and csv_corpus.skipped == 1
    md = parse_corpus_bytes("notes.md", ("word " * 150).encode())
    assert [len(p.text.split()) for p in md.passages] == [75, 75] and md.passages[0].title == "notes"


@pytest.mark.parametrize(
    "name,data,message",
    [
        ("e.txt", b"", "empty"),
        ("b.txt", b"\x00\x01\x02binary", "binary"),
        ("l.txt", "café".encode("latin-1"), "UTF-8"),
        ("x.pdf", b"%PDF-1.4", "unsupported"),
        ("c.csv", b"name,body\na,b\n", "'text' column"),
    ],
)
def test_unreadable_files_are_clear_errors(name, data, message):
    with pytest.raises(CorpusError, match=message):
        parse_corpus_bytes(name, data)
