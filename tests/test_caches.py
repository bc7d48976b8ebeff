"""The cache folders: `cache list` reports every kind with its size, `cache clear` empties exactly
what it is told (never user indexes unless named), and bad kinds follow the error rule."""

from conftest import run_cli
from rag_core import caches


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
    for args, fragment in ((["cache", "clear", "everything"], "invalid choice"), (["cache", "clear"], "needs a KIND"),
                           (["cache", "list", "maps"], "takes no KIND")):
        out = cli(*args, env=env)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], out.stderr


def test_clear_swaps_the_folder_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_LOUPE_CACHE", str(tmp_path))
    fill(tmp_path, "leaders", "k1/rows.jsonl", 10)
    fill(tmp_path, "leaders", "k2/rows.jsonl", 20)
    assert caches.clear("leaders") == 30
    assert caches.folder("leaders").is_dir() and not list(caches.folder("leaders").iterdir())
