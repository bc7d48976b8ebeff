"""`python -m rag_core cache list` shows each cache folder with its size; `cache clear KIND ...`
empties the ones named (`all`: every kind that is rebuilt on demand; user indexes only by name)."""

from __future__ import annotations

import argparse

from rag_core.storage import caches

HELP = "list the cache folders with their sizes, or clear some"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["list", "clear"])
    p.add_argument(
        "kinds",
        nargs="*",
        metavar="KIND",
        help=f"with clear: {', '.join(caches.KINDS)} or all (all leaves user-indexes alone)",
    )


def run(args: argparse.Namespace) -> int:
    if args.action == "list":
        if args.kinds:
            raise ValueError("cache list takes no KIND")
        rows = caches.usage()
        width = max(len(u.kind) for u in rows)
        for u in rows:
            print(f"{u.kind:<{width}}  {caches.human(u.bytes):>9}  {u.entries:>4} entries  {u.what}")
        print(f"{'total':<{width}}  {caches.human(sum(u.bytes for u in rows)):>9}  in {rows[0].path.parent}")
        return 0
    if not args.kinds:
        raise ValueError("cache clear needs a KIND (or all)")
    unknown = [k for k in args.kinds if k not in caches.KINDS and k != "all"]
    if unknown:
        raise ValueError(f"invalid choice: {unknown[0]!r} (choose from {', '.join(caches.KINDS)} or all)")
    kinds = list(
        dict.fromkeys(k for name in args.kinds for k in (caches.REBUILT if name == "all" else [name]))
    )
    for kind in kinds:
        print(f"cleared {kind}: {caches.human(caches.clear(kind))} freed")
    return 0
