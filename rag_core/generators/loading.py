"""Load a generator by id: the packaged SmolLM2 GGUF (converted once, cached as safetensors), a
local folder, a hub id, or a RAG checkpoint whose `.generator` submodule is taken.
"""

from __future__ import annotations

import logging
import shutil
from contextlib import contextmanager
from pathlib import Path

import torch

from rag_core.config import BASE_GENERATOR, TRAINED_GENERATOR
from rag_core.errors import first_line
from rag_core.generators.causal import CausalGenerator
from rag_core.generators.prompt_style import prompt_style_of
from rag_core.generators.seq2seq import Seq2SeqGenerator
from rag_core.generators.trained import trained_folder
from rag_core.models.sources import ModelSourceError, Source, model_type, package_path, resolve
from rag_core.storage import caches
from rag_core.storage.files import replace_dir, temp_sibling

log = logging.getLogger(__name__)

SEQ2SEQ_TYPES = {"bart", "t5", "mt5", "pegasus", "mbart", "marian", "led", "blenderbot"}


def smollm_folder(progress=None) -> Path:
    """The default generator as a safetensors folder, converted from the packaged GGUF once.

    A GGUF load dequantises every tensor (~20 s); the converted copy loads in under a second. The
    copy is written to a temporary folder and renamed, so a killed conversion leaves nothing half-made.
    """
    gguf = package_path(BASE_GENERATOR)
    target = caches.folder("models") / f"smollm2-135m-instruct-{gguf.stat().st_size}"
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if progress:
        progress("Converting the packaged SmolLM2 GGUF to safetensors (once, ~20 s)")
    with _gguf_parsed_once():
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # save_pretrained refuses a model that still looks GGUF-quantised; its weights are plain now.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = temp_sibling(target)
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        replace_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


@contextmanager
def _gguf_parsed_once():
    """One parse of a GGUF file for the whole conversion. transformers reads the file afresh for the
    config, for the tokenizer and for the weights, and each read parses all of its metadata (the
    tokenizer's 49k-entry vocabulary, in Python: ~4.7 s on 2 cores). The reader is read-only, so
    the three loads can share one; the library's own reader comes back when the conversion ends."""
    import gguf

    real = gguf.GGUFReader
    readers: dict = {}

    def shared(path, mode="r"):
        key = (str(path), mode)
        if key not in readers:
            readers[key] = real(path, mode)
        return readers[key]

    gguf.GGUFReader = shared
    try:
        yield
    finally:
        gguf.GGUFReader = real


def _dtype(device: torch.device) -> torch.dtype:
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def load_generator(model_id: str, device: torch.device, allow_downloads: bool = False, progress=None):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    if model_id in (BASE_GENERATOR, TRAINED_GENERATOR):

        def made():  # the cached folder of this packaged generator, made on first use
            base = smollm_folder(progress)
            return base if model_id == BASE_GENERATOR else trained_folder(base, progress)

        folder = made()
        try:
            return _causal(Source(str(folder), True), model_id, device, allow_downloads)
        except Exception as e:  # noqa: BLE001 - a damaged cached copy (truncated, garbled): make it again, once
            again = "converting it again" if model_id == BASE_GENERATOR else "merging it again"
            note = f"the cached generator in {folder} could not be read ({type(e).__name__}); {again}"
            log.warning(note)
            if progress:
                progress(note)
            shutil.rmtree(folder, ignore_errors=True)
            return _causal(Source(str(made()), True), model_id, device, allow_downloads)
    source = resolve(model_id, allow_downloads)
    kind = model_type(source, allow_downloads)
    kw = dict(source.kwargs(allow_downloads))
    try:
        if kind == "rag":
            from transformers import RagTokenForGeneration

            model = RagTokenForGeneration.from_pretrained(source.ref, **kw).generator
            tok = AutoTokenizer.from_pretrained(source.ref, subfolder="generator_tokenizer", **kw)
            return Seq2SeqGenerator(model.to(device, _dtype(device)).eval(), tok, model_id, device)
        if kind in SEQ2SEQ_TYPES:
            model = AutoModelForSeq2SeqLM.from_pretrained(source.ref, dtype=_dtype(device), **kw)
            tok = AutoTokenizer.from_pretrained(source.ref, **kw)
            return Seq2SeqGenerator(model.to(device).eval(), tok, model_id, device)
        return _causal(source, model_id, device, allow_downloads)
    except (OSError, ValueError) as e:
        raise ModelSourceError(f"cannot load the generator {model_id}: {first_line(e, limit=200)}") from None


def _causal(source: Source, model_id: str, device: torch.device, allow_downloads: bool) -> CausalGenerator:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kw = dict(source.kwargs(allow_downloads))
    model = AutoModelForCausalLM.from_pretrained(source.ref, dtype=_dtype(device), **kw)
    tok = AutoTokenizer.from_pretrained(source.ref, **kw)
    # the prompt the weights were trained on: a folder says so (the trained default's cached merge does)
    return CausalGenerator(model.to(device).eval(), tok, model_id, device, prompt_style_of(source.ref))
