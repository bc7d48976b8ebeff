"""LoRA adapters on the generator (peft, the ecosystem's standard), and the folders they become.

Adapters go on the attention projections peft chooses for the model type (`q_proj`, `v_proj` for
both SmolLM2's Llama layers and BART); the base weights stay frozen. peft injects the adapters
into the model's own modules, so the generator object keeps working (decoding, teacher forcing)
while it trains. At the end the adapters are merged into the weights: the saved folder is a plain
transformers model that `--generator DIR` loads like any other, and the adapter alone is kept
beside it (`adapter/`) for anyone who wants it without the merge.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from rag_core.generators.causal import FEW_SHOT_STYLE, CausalGenerator
from rag_core.generators.prompt_style import write_prompt_style

# peft is imported where it is used, as transformers is across the engine: importing it takes
# seconds, and every command of the CLI would pay for it at start-up.

RANK = 8  # adapter rank: small data, a small update
ALPHA_RATIO = 2  # lora_alpha = 2 * rank: the adapter's update is scaled by alpha / rank = 2
DROPOUT = 0.0  # none: a resumed run then repeats an uninterrupted one exactly


@dataclass
class Adapted:
    """A generator whose model carries LoRA adapters, and the peft wrapper that owns them."""

    generator: object
    peft_model: object  # peft.PeftModel

    def parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.peft_model.parameters() if p.requires_grad]

    def state(self) -> dict[str, torch.Tensor]:
        """The adapter weights alone (what a checkpoint keeps)."""
        from peft import get_peft_model_state_dict

        return {k: v.detach().cpu().clone() for k, v in get_peft_model_state_dict(self.peft_model).items()}

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        from peft import set_peft_model_state_dict

        result = set_peft_model_state_dict(self.peft_model, state)
        if getattr(result, "unexpected_keys", None):
            raise ValueError(f"checkpoint adapter does not fit this generator: {result.unexpected_keys[:3]}")


def attach(gen, rank: int = RANK, seed: int = 0) -> Adapted:
    """Put fresh adapters on `gen.model` (seeded: the A matrices start random, B at zero)."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    config = LoraConfig(
        r=rank,
        lora_alpha=ALPHA_RATIO * rank,
        lora_dropout=DROPOUT,
        task_type="CAUSAL_LM" if isinstance(gen, CausalGenerator) else "SEQ_2_SEQ_LM",
    )
    with (
        warnings.catch_warnings()
    ):  # transformers' deprecation notes about peft's own calls: not the user's concern
        warnings.simplefilter("ignore", FutureWarning)
        peft_model = get_peft_model(gen.model, config)
    peft_model.eval()  # no dropout anywhere: the loss curve is the model's own, and resumable
    return Adapted(gen, peft_model)


def merged(adapted: Adapted):
    """The adapters merged into the weights, as a fresh generator object of the same kind.

    A fresh object, not the old one: a causal generator caches the few-shot prefix's keys/values
    per process, and those were computed with the old weights."""
    model = adapted.peft_model.merge_and_unload()
    gen = adapted.generator
    if isinstance(gen, CausalGenerator):  # the merged weights read the prompt they were trained on
        return CausalGenerator(model.eval(), gen.tokenizer, gen.id, gen.device, gen.prompt_style)
    return type(gen)(model.eval(), gen.tokenizer, gen.id, gen.device)


def save_adapter(adapted: Adapted, folder: Path) -> None:
    adapted.peft_model.save_pretrained(folder)


def save_generator(gen, folder: Path) -> None:
    """A folder that `--generator DIR` loads: the (merged) model, its generation config, its tokenizer."""
    gen.model.save_pretrained(folder)
    gen.tokenizer.save_pretrained(folder)
    write_prompt_style(folder, getattr(gen, "prompt_style", FEW_SHOT_STYLE))
