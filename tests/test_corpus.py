import pytest

from rag_core.corpus import CorpusError, chunk_words, load_wiki, parse_corpus_bytes


def test_wiki_corpus_is_100_word_passages():
    ps = load_wiki()
    assert 12000 < len(ps) < 12700
    assert max(len(p.text.split()) for p in ps) == 100
    assert len({p.id for p in ps}) == len(ps)
    assert any(p.title == "Moby-Dick" and "Melville" in p.text for p in ps)


def test_chunking_keeps_every_word():
    words = [f"w{i}" for i in range(345)]
    chunks = chunk_words(" ".join(words))
    assert [len(c.split()) for c in chunks] == [100, 100, 100, 45]
    assert " ".join(chunks).split() == words


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
    assert [len(p.text.split()) for p in md.passages] == [100, 50] and md.passages[0].title == "notes"


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
