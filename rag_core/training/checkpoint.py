"""The stop/resume checkpoint of a training run: one file, written atomically.

It holds what an uninterrupted run would still have in memory after step `step`: the trainable
weights (the whole query encoder, or the LoRA adapters alone), each optimiser's state (Adam's
moments), the loss curve so far and the settings it was made with. Batches are a function of the
step number and the seed (`loop.batch_for_step`) and nothing samples at random while training
(dropout is off), so a resumed run continues to the same weights as one that never stopped.

>>> import tempfile, pathlib, torch
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> save(folder, Checkpoint(3, [2.0, 1.5, 1.2], {"query": {"w": torch.ones(2)}}, {}, {"k": 5}, 1.0))
>>> back = load(folder); back.step, back.losses, back.weights["query"]["w"].tolist()
(3, [2.0, 1.5, 1.2], [1.0, 1.0])
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .._fs import write_atomic

FILE = "checkpoint.pt"


@dataclass
class Checkpoint:
    step: int  # optimiser steps done
    losses: list[float]  # mean loss of each step done
    weights: dict[str, dict[str, torch.Tensor]]  # part ("query", "generator") -> its trainable tensors
    optimizers: dict[str, dict]  # part -> optimiser state_dict
    settings: dict  # TrainSettings as a dict, to refuse a resume under other settings
    seconds: float  # training time so far


def save(folder: Path, ckpt: Checkpoint) -> None:
    write_atomic(Path(folder) / FILE, lambda tmp: torch.save(asdict(ckpt), tmp))


def exists(folder: Path) -> bool:
    return (Path(folder) / FILE).is_file()


def load(folder: Path) -> Checkpoint:
    """Read a checkpoint back (tensors on the CPU; `weights_only`: a checkpoint never runs code)."""
    try:
        data = torch.load(Path(folder) / FILE, map_location="cpu", weights_only=True)
        return Checkpoint(**data)
    except (OSError, RuntimeError, TypeError, KeyError, EOFError) as e:
        raise ValueError(f"the checkpoint in {folder} cannot be read ({type(e).__name__}): start afresh with --force") from None


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
