"""Ship a training run's generator adapter as the product's trained default (`assets/adapters/`).

    python -m rag_core.training.shipped_adapter RUN_DIR [--command "..."]

copies the run's LoRA adapter (peft's format, never the merged model), rewrites its base-model
field to the packaged id (the run names a cache folder), and writes `manifest.json` beside it: the
base model's id and file hash, the training data's hashes, the settings and seed, the command that
made it, the training time and loss, and the log-probabilities the merged model gives on three
fixed inputs, which `tests/test_trained_default.py` checks the shipped files against.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch

from rag_core.config import BASE_GENERATOR, TRAINED_GENERATOR
from rag_core.corpus import Passage
from rag_core.generators.causal import PLAIN_STYLE
from rag_core.generators.loading import load_generator
from rag_core.generators.trained import ADAPTER_DIR, ADAPTER_FILES, adapter_hash
from rag_core.models.sources import package_path
from rag_core.storage.files import replace_dir, temp_sibling, write_json_atomic
from rag_core.training.conditionals import answer_token_logp
from rag_core.training.output import ADAPTER, GENERATOR, file_sha256, read_manifest

# Three fixed inputs the recorded log-probabilities are computed on (written for this check; none
# is a training, dev or test question).
PROBES = [
    (
        "Which river flows through Florence?",
        Passage(
            "probe#0",
            "Florence",
            "Florence is a city in central Italy and the capital of Tuscany. It lies on the "
            "river Arno and was a centre of medieval European trade and finance.",
        ),
        "Arno",
    ),
    (
        "In what year did the Titanic sink?",
        Passage(
            "probe#1",
            "RMS Titanic",
            "RMS Titanic was a British passenger liner that sank in the North Atlantic "
            "Ocean on 15 April 1912 after striking an iceberg during her maiden voyage.",
        ),
        "1912",
    ),
    (
        "Who composed The Four Seasons?",
        Passage(
            "probe#2",
            "The Four Seasons",
            "The Four Seasons is a group of four violin concertos by the Italian "
            "composer Antonio Vivaldi, written about 1718 to 1720.",
        ),
        "Antonio Vivaldi",
    ),
]


def probe_logps(gen) -> list[list[float]]:
    """log p(y_i | x, z, y_<i) of each probe's answer under its passage, per token."""
    with torch.no_grad():
        return [answer_token_logp(gen, q, [p], gen.encode_answer(a))[0].tolist() for q, p, a in PROBES]


def ship(run: Path, command: str, dest: Path = ADAPTER_DIR) -> dict:
    manifest = read_manifest(run)
    if manifest is None or manifest.get("status") != "done" or "generator" not in manifest.get("outputs", {}):
        raise SystemExit(f"error: {run} is not a finished training run with a trained generator")
    if manifest["base"]["generator"] != BASE_GENERATOR or manifest["settings"].get("prompt") != PLAIN_STYLE:
        raise SystemExit(
            f"error: the shipped adapter must be trained from {BASE_GENERATOR} on the plain prompt"
        )
    tmp = temp_sibling(dest)  # a new empty folder beside dest; one rename puts it in place
    source = run / GENERATOR / ADAPTER
    for name in ADAPTER_FILES:
        shutil.copyfile(source / name, tmp / name)
    config = json.loads((tmp / "adapter_config.json").read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = BASE_GENERATOR  # not the cache folder it was trained from
    (tmp / "adapter_config.json").write_text(
        json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    replace_dir(tmp, dest)
    gen = load_generator(TRAINED_GENERATOR, torch.device("cpu"))
    gguf = package_path(BASE_GENERATOR)
    shipped = {
        "kind": "rag-loupe-adapter",
        "version": 1,
        "id": TRAINED_GENERATOR,
        "base": {
            "generator": BASE_GENERATOR,
            "file": gguf.name,
            "sha256": file_sha256(gguf),
            "question_encoder": manifest["base"]["question_encoder"],
        },
        "adapter_sha256": adapter_hash(dest),
        "prompt": PLAIN_STYLE,
        "data": manifest["data"],
        "settings": manifest["settings"],
        "seed": manifest["settings"]["seed"],
        "index": manifest["index"],
        "command": command,
        "seconds": manifest["seconds"],
        "device": manifest["device"],
        "threads": torch.get_num_threads(),
        "loss": manifest["loss"],
        "probes": [
            {"question": q, "title": p.title, "text": p.text, "answer": a, "token_logp": lp}
            for (q, p, a), lp in zip(PROBES, probe_logps(gen))
        ],
    }
    write_json_atomic(dest / "manifest.json", shipped, indent=1)
    return shipped


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m rag_core.training.shipped_adapter", description=__doc__.split("\n")[0]
    )
    p.add_argument("run", type=Path, help="a finished `train --out` folder")
    p.add_argument(
        "--command", default="make adapter", help="the command that made the run (kept in the manifest)"
    )
    args = p.parse_args(argv)
    shipped = ship(args.run, args.command)
    print(f"shipped {shipped['adapter_sha256']} to {ADAPTER_DIR}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
