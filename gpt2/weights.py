"""Where GPT-2's weights come from: a local snapshot, the Hugging Face cache or hub, or
seeded random values (timings do not depend on weight values; the text does)."""
from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

import torch

from gpt2.config import HUB_NAMES, SIZES, GPT2Config, ModelDirError
from gpt2.model import GPT2, AttentionFn

RANDOM_SEED = 1234
_HUB_HOST = ("huggingface.co", 443)
_HUB_PROBE_SECONDS = 3.0


@dataclass(frozen=True)
class RandomWeights:
    """GPT-2's architecture of one released size with seeded random weights."""

    size: str = "small"
    seed: int = RANDOM_SEED

    def describe(self) -> str:
        return f"random:{self.size}:seed{self.seed}"

    def config(self) -> GPT2Config:
        return SIZES[self.size]

    def check(self) -> None:
        """Nothing to check: a released size's architecture."""


@dataclass(frozen=True)
class SnapshotWeights:
    """Real weights in a local snapshot directory (config.json + model.safetensors).

    hub_name: the Hugging Face model the snapshot came from, None for a --model-dir.
    """

    directory: Path
    hub_name: str | None = None

    def describe(self) -> str:
        return f"hf:{self.hub_name}" if self.hub_name else f"dir:{self.directory}"

    def config(self) -> GPT2Config:
        return GPT2Config.from_json(self.directory / "config.json")

    def check(self) -> None:
        """ModelDirError unless config.json is GPT-2's and every tensor of model.safetensors
        that the model uses has the shape config.json gives it (the file's header only)."""
        _check_shapes(self.directory / "model.safetensors", self.config())


WeightsSource = RandomWeights | SnapshotWeights


def _hub_reachable() -> bool:
    try:
        with socket.create_connection(_HUB_HOST, timeout=_HUB_PROBE_SECONDS):
            return True
    except OSError:
        return False


def _snapshot_dir(name: str, *, allow_network: bool) -> Path | None:
    """A local snapshot of hub model `name` (cache first, then the hub if allowed)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    patterns = ["config.json", "model.safetensors"]
    try:
        return Path(snapshot_download(name, allow_patterns=patterns, local_files_only=True))
    except Exception:  # not in the cache; huggingface_hub raises several types here
        pass
    if not allow_network or not _hub_reachable():
        return None
    try:
        return Path(snapshot_download(name, allow_patterns=patterns))
    except Exception:
        return None


def resolve(model_dir: str | Path | None, weights: str = "auto", size: str = "small") -> WeightsSource:
    """Decide where the weights come from.

    model_dir: a local snapshot directory (config.json + model.safetensors).
    weights:   "random"; "auto" (the cached hub snapshot of `size` if there is one, else
               random, never touching the network); or a hub name such as "gpt2".
    """
    if model_dir is not None:
        path = Path(model_dir)
        if path.is_file():
            raise ModelDirError(f"model directory {path} is a file: name the folder that holds config.json and "
                                "model.safetensors")
        if not path.is_dir():
            raise ModelDirError(f"model directory {path} does not exist")
        for required in ("config.json", "model.safetensors"):
            if (path / required).is_dir():
                raise ModelDirError(f"model directory {path}: its {required} is a folder, not a file")
            if not (path / required).is_file():
                raise ModelDirError(f"model directory {path} has no {required}")
        return SnapshotWeights(path)
    if weights == "random":
        return RandomWeights(size)
    if weights == "auto":
        snapshot = _snapshot_dir(HUB_NAMES[size], allow_network=False)
        return RandomWeights(size) if snapshot is None else SnapshotWeights(snapshot, HUB_NAMES[size])
    snapshot = _snapshot_dir(weights, allow_network=True)
    if snapshot is None:
        raise ModelDirError(f"weights {weights!r} are neither in the Hugging Face cache nor reachable "
                            "on the hub; use --model-dir DIR or --weights random")
    return SnapshotWeights(snapshot, weights)


def _our_name(key: str) -> str | None:
    """A checkpoint tensor's name as our parameter's, or None for one that is not ours.

    GPT2LMHeadModel saves under "transformer."; GPT2Model without a prefix. The causal mask
    buffers (attn.bias, attn.masked_bias) of old checkpoints and the tied lm_head.weight are
    not parameters of ours.
    """
    key = key.removeprefix("transformer.")
    if key.endswith((".attn.bias", ".attn.masked_bias")) or key == "lm_head.weight":
        return None
    return key


def _check_shapes(path: Path, config: GPT2Config) -> None:
    """ModelDirError naming the first tensor of `path` whose shape is not the one `config`
    gives it (read from the header; no weights are loaded)."""
    from safetensors import SafetensorError, safe_open

    with torch.device("meta"):
        expected = {name: tuple(t.shape) for name, t in GPT2(config, lambda q, k, v, h: q).state_dict().items()}
    try:
        with safe_open(str(path), framework="pt") as f:
            found = {name: tuple(f.get_slice(key).get_shape()) for key in f.keys()
                     if (name := _our_name(key)) in expected}
    except (SafetensorError, OSError, ValueError) as err:
        raise ModelDirError(f"{path} is not a readable safetensors file: {err}") from None
    wrong = [(name, shape) for name, shape in found.items() if shape != expected[name]]
    if wrong:
        name, shape = wrong[0]
        more = f" ({len(wrong) - 1} more tensors differ)" if len(wrong) > 1 else ""
        raise ModelDirError(f"{path}: tensor {name} has shape {list(shape)}, but config.json's model "
                            f"({config.describe()}) needs {list(expected[name])}{more}")


def _load_state_dict(directory: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = directory / "model.safetensors"
    try:
        raw = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise ModelDirError(f"{path} is not a readable safetensors file: {err}") from None
    return {name: tensor.float() for key, tensor in raw.items() if (name := _our_name(key)) is not None}


def build_model(source: WeightsSource, attention: AttentionFn, device: torch.device | str,
                dtype: torch.dtype = torch.float32) -> GPT2:
    """The model with its weights on `device`, in eval mode: made in float32 (random weights
    drawn, or a snapshot loaded, as float32), then cast once to `dtype`; activations then run
    in that dtype as PyTorch runs them."""
    config = source.config()
    if isinstance(source, RandomWeights):
        with torch.device(device):
            model = GPT2(config, attention)
        _init_random(model, device, source.seed)
    else:
        source.check()
        model = GPT2(config, attention)
        state = _load_state_dict(source.directory)
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise ModelDirError(f"{source.directory}: weights do not match GPT-2 ({len(missing)} missing, "
                                f"e.g. {missing[:3]}; {len(unexpected)} unexpected, e.g. {unexpected[:3]})")
        model.to(device)
    return model.to(dtype).eval().requires_grad_(False)


def _init_random(model: GPT2, device: torch.device | str, seed: int) -> None:
    """GPT-2's initialisation (normal, std 0.02; LayerNorm 1, 0), from a fixed seed."""
    generator = torch.Generator(device=device).manual_seed(seed)
    for name, param in model.named_parameters():
        if ".ln_" in name or name.startswith("ln_f"):
            param.data.fill_(1.0 if name.endswith("weight") else 0.0)
        elif name.endswith("bias"):
            param.data.zero_()
        else:
            param.data.normal_(0.0, 0.02, generator=generator)
