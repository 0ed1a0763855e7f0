"""GPT-2's hyper-parameters, read from a Hugging Face config.json or named by size."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path


# GPT-2's tokenizer: 50,256 byte-pair ranks and <|endoftext|> (gpt2/tokenizer.py). A model
# must embed every id it produces.
TOKENIZER_VOCAB_SIZE = 50257


class ModelDirError(ValueError):
    """A model directory that is missing files or holds something that is not GPT-2."""


@dataclass(frozen=True)
class GPT2Config:
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    n_positions: int = 1024
    vocab_size: int = TOKENIZER_VOCAB_SIZE
    layer_norm_epsilon: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @classmethod
    def from_json(cls, path: Path) -> "GPT2Config":
        """Read a Hugging Face config.json; ModelDirError names the file and the bad field."""
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise ModelDirError(f"{path} does not exist") from None
        except (OSError, UnicodeDecodeError) as err:
            raise ModelDirError(f"{path} cannot be read: {err}") from None
        except json.JSONDecodeError as err:
            raise ModelDirError(f"{path} is not valid JSON: {err}") from None
        if not isinstance(raw, dict):
            raise ModelDirError(f"{path} must hold a JSON object")
        if raw.get("model_type", "gpt2") != "gpt2":
            raise ModelDirError(f"{path} describes a {raw.get('model_type')!r} model, not gpt2")
        missing = [key for key in ("n_layer", "n_head", "n_embd") if key not in raw]
        if missing:
            raise ModelDirError(f"{path} lacks {', '.join(missing)}")
        defaults = cls()
        config = cls(n_layer=_positive_int(raw, "n_layer", path), n_head=_positive_int(raw, "n_head", path),
                     n_embd=_positive_int(raw, "n_embd", path),
                     n_positions=_positive_int(raw, "n_positions", path, defaults.n_positions),
                     vocab_size=_positive_int(raw, "vocab_size", path, defaults.vocab_size),
                     layer_norm_epsilon=_positive_float(raw, "layer_norm_epsilon", path,
                                                        defaults.layer_norm_epsilon))
        if config.n_embd % config.n_head:
            raise ModelDirError(f"{path}: n_embd={config.n_embd} is not divisible by n_head={config.n_head}")
        if config.vocab_size < TOKENIZER_VOCAB_SIZE:
            raise ModelDirError(f"{path}: vocab_size={config.vocab_size} is smaller than GPT-2's tokenizer, whose ids "
                                f"go up to {TOKENIZER_VOCAB_SIZE - 1}: vocab_size must be at least "
                                f"{TOKENIZER_VOCAB_SIZE}")
        return config

    def describe(self) -> str:
        """'12 layers, 12 heads, width 768' (what plot titles say instead of a size name)."""
        return f"{self.n_layer} layers, {self.n_head} heads, width {self.n_embd}"


def _positive_int(raw: dict, key: str, path: Path, default: int | None = None) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelDirError(f"{path}: {key} must be a positive integer, got {value!r}")
    return value


def _positive_float(raw: dict, key: str, path: Path, default: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ModelDirError(f"{path}: {key} must be a positive finite number, got {value!r}")
    return float(value)


# The four released GPT-2 sizes (the same numbers as their Hugging Face config.json files).
SIZES: dict[str, GPT2Config] = {
    "small": GPT2Config(n_layer=12, n_head=12, n_embd=768),
    "medium": GPT2Config(n_layer=24, n_head=16, n_embd=1024),
    "large": GPT2Config(n_layer=36, n_head=20, n_embd=1280),
    "xl": GPT2Config(n_layer=48, n_head=25, n_embd=1600),
}
HUB_NAMES = {"small": "gpt2", "medium": "gpt2-medium", "large": "gpt2-large", "xl": "gpt2-xl"}
