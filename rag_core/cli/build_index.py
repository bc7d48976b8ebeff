"""`python -m rag_core build-index CORPUS.jsonl --out DIR`: encode a corpus into a FAISS index folder.

`--out` may name a new path or an existing RAG Loupe index (replaced only with `--force`, and then
atomically); any other folder is refused before any work, and nothing is touched."""
from __future__ import annotations

import argparse
import sys

from ..catalog import build_corpus_index
from ..corpus import read_corpus_file
from ..encoders import load_encoder
from ..index import check_output_folder
from ..sources import pick_device, set_threads
from .common import add_model_args, config_from, progress_bar

HELP = "encode a JSONL corpus into a FAISS index folder"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("corpus")
    p.add_argument("--out", required=True, help="a new folder, or an existing index (with --force)")
    p.add_argument("--force", action="store_true", help="replace the existing index at --out")
    p.add_argument("--factory", default="Flat", help="FAISS factory string: Flat (exact), HNSW32, IVF1024,Flat ...")
    add_model_args(p)


def run(args: argparse.Namespace) -> int:
    cfg = config_from(args)
    out = check_output_folder(args.out, args.force)  # refuse a non-index folder before any work
    parsed = read_corpus_file(args.corpus)
    if parsed.skipped:
        print(f"skipped {parsed.skipped} unreadable rows", file=sys.stderr)
    set_threads(cfg.threads)
    encoder = load_encoder(cfg.question_encoder, cfg.ctx_encoder, pick_device(cfg.device), cfg.allow_downloads)
    with progress_bar() as progress:
        idx = build_corpus_index(parsed.passages, encoder, out, factory=args.factory, progress=progress)
    print(f"built {args.out}: {len(idx)} passages, dim {idx.dim}, {idx.manifest['factory']}, encoder {encoder.id}")
    return 0
