"""GPT-2's hyper-parameters, read from a Hugging Face config.json or named by size."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


class ModelDirError(ValueError):
    """A model directory that is missing files or holds something that is not GPT-2."""


@dataclass(frozen=True)
class GPT2Config:
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    n_positions: int = 1024
    vocab_size: int = 50257
    layer_norm_epsilon: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @classmethod
    def from_json(cls, path: Path) -> "GPT2Config":
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise ModelDirError(f"{path} does not exist") from None
        except json.JSONDecodeError as err:
            raise ModelDirError(f"{path} is not valid JSON: {err}") from None
        if not isinstance(raw, dict):
            raise ModelDirError(f"{path} must hold a JSON object")
        if raw.get("model_type", "gpt2") != "gpt2":
            raise ModelDirError(f"{path} describes a {raw.get('model_type')!r} model, not gpt2")
        missing = [key for key in ("n_layer", "n_head", "n_embd") if key not in raw]
        if missing:
            raise ModelDirError(f"{path} lacks {', '.join(missing)}")
        config = cls(n_layer=int(raw["n_layer"]), n_head=int(raw["n_head"]), n_embd=int(raw["n_embd"]),
                     n_positions=int(raw.get("n_positions", 1024)),
                     vocab_size=int(raw.get("vocab_size", 50257)),
                     layer_norm_epsilon=float(raw.get("layer_norm_epsilon", 1e-5)))
        if config.n_embd % config.n_head:
            raise ModelDirError(f"{path}: n_embd={config.n_embd} is not divisible by n_head={config.n_head}")
        return config


# The four released GPT-2 sizes (the same numbers as their Hugging Face config.json files).
SIZES: dict[str, GPT2Config] = {
    "small": GPT2Config(n_layer=12, n_head=12, n_embd=768),
    "medium": GPT2Config(n_layer=24, n_head=16, n_embd=1024),
    "large": GPT2Config(n_layer=36, n_head=20, n_embd=1280),
    "xl": GPT2Config(n_layer=48, n_head=25, n_embd=1600),
}
HUB_NAMES = {"small": "gpt2", "medium": "gpt2-medium", "large": "gpt2-large", "xl": "gpt2-xl"}
