"""The stop/resume checkpoint of a training run: one file, written atomically.

It holds what an uninterrupted run would still have in memory after step `step`: the trainable
weights (the whole query encoder, or the LoRA adapters alone), each optimiser's state (Adam's
moments), the loss curve so far and the settings it was made with. Batches are a function of the
step number and the seed (`loop.batch_for_step`) and nothing samples at random while training
(dropout is off), so a resumed run continues to the same weights as one that never stopped.

The file is safetensors: every tensor (weights and optimiser moments) by a flat name, everything
else as JSON in its metadata. Reading it never unpickles anything.

>>> import tempfile, pathlib, torch
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> save(folder, Checkpoint(3, [2.0, 1.5, 1.2], {"query": {"w": torch.ones(2)}}, {}, {"k": 5}, 1.0))
>>> back = load(folder); back.step, back.losses, back.weights["query"]["w"].tolist()
(3, [2.0, 1.5, 1.2], [1.0, 1.0])
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from rag_core.storage.files import write_atomic

FILE = "checkpoint.safetensors"


@dataclass
class Checkpoint:
    step: int  # optimiser steps done
    losses: list[float]  # mean loss of each step done
    weights: dict[str, dict[str, torch.Tensor]]  # part ("query", "generator") -> its trainable tensors
    optimizers: dict[str, dict]  # part -> optimiser state_dict
    settings: dict  # TrainSettings as a dict, to refuse a resume under other settings
    seconds: float  # training time so far


def _flatten(ckpt: Checkpoint) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors by flat name, the rest as JSON-able data): weights/PART/NAME, optim/PART/INDEX/KEY."""
    tensors = {
        f"weights/{part}/{name}": t.contiguous()
        for part, named in ckpt.weights.items()
        for name, t in named.items()
    }
    optim = {}
    for part, sd in ckpt.optimizers.items():
        state = {}
        for idx, entry in sd.get("state", {}).items():
            state[str(idx)] = {k: v for k, v in entry.items() if not torch.is_tensor(v)}
            tensors.update(
                {f"optim/{part}/{idx}/{k}": v.contiguous() for k, v in entry.items() if torch.is_tensor(v)}
            )
        optim[part] = {"state": state, "param_groups": sd.get("param_groups", [])}
    rest = {
        "step": ckpt.step,
        "losses": ckpt.losses,
        "settings": ckpt.settings,
        "seconds": ckpt.seconds,
        "optimizers": optim,
        "parts": sorted(ckpt.weights),
    }
    return tensors, rest


def _unflatten(tensors: dict[str, torch.Tensor], rest: dict) -> Checkpoint:
    weights: dict[str, dict[str, torch.Tensor]] = {part: {} for part in rest["parts"]}
    optimizers = {
        part: {"state": {int(i): dict(e) for i, e in o["state"].items()}, "param_groups": o["param_groups"]}
        for part, o in rest["optimizers"].items()
    }
    for key, t in tensors.items():
        kind, part, name = key.split("/", 2)
        if kind == "weights":
            weights[part][name] = t
        else:
            idx, field = name.rsplit("/", 1)
            optimizers[part]["state"].setdefault(int(idx), {})[field] = t
    return Checkpoint(rest["step"], rest["losses"], weights, optimizers, rest["settings"], rest["seconds"])


def save(folder: Path, ckpt: Checkpoint) -> None:
    tensors, rest = _flatten(ckpt)
    write_atomic(
        Path(folder) / FILE, lambda tmp: save_file(tensors, tmp, metadata={"checkpoint": json.dumps(rest)})
    )


def exists(folder: Path) -> bool:
    return (Path(folder) / FILE).is_file()


def load(folder: Path) -> Checkpoint:
    """Read a checkpoint back (tensors on the CPU)."""
    try:
        with safe_open(str(Path(folder) / FILE), framework="pt", device="cpu") as f:
            rest = json.loads(f.metadata()["checkpoint"])
            tensors = {k: f.get_tensor(k) for k in f.keys()}
        return _unflatten(tensors, rest)
    except (OSError, RuntimeError, TypeError, KeyError, ValueError, SafetensorError) as e:
        raise ValueError(
            f"the checkpoint in {folder} cannot be read ({type(e).__name__}): start afresh with --force"
        ) from None


def trainable_tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The parameters that train, copied to the CPU."""
    return {name: p.detach().cpu().clone() for name, p in module.named_parameters() if p.requires_grad}


def restore_tensors(module: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Copy saved tensors back into the parameters of the same names (all must fit)."""
    params = dict(module.named_parameters())
    unknown = [n for n in tensors if n not in params or params[n].shape != tensors[n].shape]
    if unknown:
        raise ValueError(f"the checkpoint does not fit this model (first mismatch: {unknown[0]})")
    with torch.no_grad():
        for name, value in tensors.items():
            params[name].copy_(value.to(params[name].device, params[name].dtype))
