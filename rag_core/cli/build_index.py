"""`python -m rag_core build-index CORPUS.jsonl --out DIR`: encode a corpus into a FAISS index folder.

`--out` may name a new path or an existing RAG Loupe index (replaced only with `--force`, and then
atomically); any other folder is refused before any work, and nothing is touched.
`--engine ray` encodes on a Ray cluster (`rag_core.retrieval.ray_build`, the `scale` extra) and gives the same
index; it is imported only then, so a local build never needs Ray installed."""

from __future__ import annotations

import argparse
import sys

from rag_core.cli.common import CliError, add_model_args, positive_int, progress_bar, stack_from
from rag_core.corpus import read_corpus_file
from rag_core.models.sources import pick_device, set_threads
from rag_core.retrieval.catalog import build_corpus_index
from rag_core.retrieval.encoders import load_encoder
from rag_core.retrieval.index import check_output_folder

HELP = "encode a JSONL corpus into a FAISS index folder"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("corpus")
    p.add_argument("--out", required=True, help="a new folder, or an existing index (with --force)")
    p.add_argument("--force", action="store_true", help="replace the existing index at --out")
    p.add_argument(
        "--factory", default="Flat", help="FAISS factory string: Flat (exact), HNSW32, IVF1024,Flat ..."
    )
    p.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="encode here, or on a Ray cluster (needs requirements-scale.txt); the index is the same",
    )
    p.add_argument(
        "--ray-address",
        default=None,
        help="--engine ray: the cluster to join (what `ray start --head` prints; default $RAY_ADDRESS, "
        "else a Ray started on this machine)",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help="--engine ray: encoder copies (default: one a GPU of the cluster, else one a CPU)",
    )
    add_model_args(p)


def _ray_build():
    """The Ray engine module, or one clear error when Ray is not installed."""
    try:
        from rag_core.retrieval import ray_build
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "ray":
            raise
        raise CliError(
            "--engine ray needs Ray, which is not installed: pip install -r requirements-scale.txt "
            "(or the package's `scale` extra)"
        ) from None
    return ray_build


def run(args: argparse.Namespace) -> int:
    stack = stack_from(args)
    if args.engine == "local" and (args.workers or args.ray_address):
        raise CliError("--workers and --ray-address need --engine ray")
    out = check_output_folder(args.out, args.force)  # refuse a non-index folder before any work
    ray_build = _ray_build() if args.engine == "ray" else None
    parsed = read_corpus_file(args.corpus)
    if parsed.skipped:
        print(f"skipped {parsed.skipped} unreadable rows", file=sys.stderr)
    set_threads(stack.threads)
    # on Ray the actors encode (on their GPUs); the copy here names the index and fails early, on the CPU
    device = pick_device(stack.device if ray_build is None else "cpu")
    encoder = load_encoder(stack.question_encoder, stack.ctx_encoder, device, stack.allow_downloads)
    with progress_bar() as progress:
        if ray_build is None:
            idx = build_corpus_index(parsed.passages, encoder, out, factory=args.factory, progress=progress)
        else:
            spec = ray_build.EncoderSpec(stack.question_encoder, stack.ctx_encoder, stack.allow_downloads)
            idx = ray_build.build_corpus_index(
                parsed.passages,
                encoder,
                spec,
                out,
                factory=args.factory,
                workers=args.workers,
                address=args.ray_address,
                device=stack.device,
                progress=progress,
            )
    print(
        f"built {args.out}: {len(idx)} passages, dim {idx.dim}, "
        f"{idx.manifest['factory']}, encoder {encoder.id}"
    )
    return 0
