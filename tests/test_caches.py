"""The cache folders: `cache list` reports every kind with its size, `cache clear` empties exactly
what it is told (never user indexes unless named), and bad kinds follow the error rule."""

from rag_core.storage import caches

from conftest import run_cli


def cli(*args, env):
    return run_cli(*args, env=env)


def fill(root, kind, name, size):
    path = root / kind / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


def test_list_and_clear(tmp_path):
    env = {"RAG_LOUPE_CACHE": str(tmp_path)}
    fill(tmp_path, "maps", "a.npz", 3000)
    fill(tmp_path, "eval", "latest.json", 1000)
    kept = fill(tmp_path, "user-indexes", "notes/passages.jsonl", 500)
    out = cli("cache", "list", env=env)
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line for line in out.stdout.splitlines()}
    assert set(caches.KINDS) <= set(lines)
    assert "2.9 KB" in lines["maps"] and "1000 B" in lines["eval"] and "500 B" in lines["user-indexes"]
    assert "4.4 KB" in lines["total"]
    out = cli("cache", "clear", "all", env=env)
    assert out.returncode == 0, out.stderr
    assert "cleared maps: 2.9 KB freed" in out.stdout and "user-indexes" not in out.stdout
    assert not list((tmp_path / "maps").iterdir()) and not list((tmp_path / "eval").iterdir())
    assert kept.read_bytes() == b"x" * 500  # user data stays unless named
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no trash left behind
    out = cli("cache", "clear", "user-indexes", env=env)
    assert out.returncode == 0 and not kept.exists()


def test_bad_kinds_are_one_line_errors(tmp_path):
    env = {"RAG_LOUPE_CACHE": str(tmp_path)}
    for args, fragment in (
        (["cache", "clear", "everything"], "invalid choice"),
        (["cache", "clear"], "needs a KIND"),
        (["cache", "list", "maps"], "takes no KIND"),
    ):
        out = cli(*args, env=env)
        lines = out.stderr.strip().splitlines()
        assert (
            out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0]
        ), out.stderr


def test_clear_swaps_the_folder_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_LOUPE_CACHE", str(tmp_path))
    fill(tmp_path, "leaders", "k1/rows.jsonl", 10)
    fill(tmp_path, "leaders", "k2/rows.jsonl", 20)
    assert caches.clear("leaders") == 30
    assert caches.folder("leaders").is_dir() and not list(caches.folder("leaders").iterdir())


def test_a_bounded_kind_keeps_its_newest_entries_and_the_one_just_written(tmp_path, monkeypatch):
    import os

    monkeypatch.setenv("RAG_LOUPE_CACHE", str(tmp_path))
    for i in range(10):  # ten corpus indexes written one after another
        entry = fill(tmp_path, "corpus-indexes", f"c{i}/index.faiss", 10).parent
        os.utime(entry, (1000 + i, 1000 + i))
    os.utime(tmp_path / "corpus-indexes" / "c0", (5000, 5000))  # the oldest name, written last
    hidden = fill(tmp_path, "corpus-indexes", ".c9.tmp-123/index.faiss", 10).parent  # a build in progress
    other = fill(tmp_path, "maps", "m.npz", 10)
    gone = caches.keep_newest("corpus-indexes", keep=tmp_path / "corpus-indexes" / "c1")
    left = sorted(p.name for p in (tmp_path / "corpus-indexes").iterdir())
    assert len(left) == caches.LIMITS["corpus-indexes"] + 1  # the limit, plus the temporary folder
    assert left == [".c9.tmp-123", "c0", "c1", "c4", "c5", "c6", "c7", "c8", "c9"]
    assert sorted(p.name for p in gone) == ["c2", "c3"] and hidden.is_dir() and other.is_file()


def test_saved_maps_stay_within_their_limit(tmp_path, monkeypatch):
    import numpy as np

    from rag_core.corpus import Passage
    from rag_core.maps import projection
    from rag_core.retrieval.index import PassageIndex

    monkeypatch.setenv("RAG_LOUPE_CACHE", str(tmp_path))
    monkeypatch.setitem(caches.LIMITS, "maps", 2)
    rng = np.random.default_rng(0)
    for n in (40, 41, 42):  # three indexes, three PCA maps saved
        passages = [Passage(f"p{n}-{i}", "t", "x", "") for i in range(n)]
        projection.fit_map(
            PassageIndex.build(rng.normal(size=(n, 8)).astype(np.float32), passages, "enc"), "pca", 2
        )
    saved = sorted((tmp_path / "maps").glob("*.npz"), key=lambda p: p.stat().st_mtime)
    assert len(saved) == 2
    assert np.load(saved[-1])["coords"].shape == (42, 2)  # the newest map is kept
