"""The one registry of attention backends: baselines and CUDA versions, one row each.

Each row carries its own behaviour: where it can run (`why_unavailable`) and how it
becomes an attention function (`attention`). Everything else (the GPT-2 command, builds,
the correctness gate, benchmarks, plots, README tables) iterates over these rows and
never dispatches on a backend's name.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Iterable

import torch
from torch.nn.attention import SDPBackend

from backends import arguments, baselines, precision
from gpt2.config import GPT2Config
from gpt2.model import GPT2, AttentionFn, DecodeFn

PROJECT_ROOT = Path(__file__).resolve().parent.parent
VERSIONS_DIR = PROJECT_ROOT / "versions"
HEAD_DIM = 64  # d: the op contract's head size (GPT-2's)

Capability = tuple[int, int]  # CUDA compute capability (major, minor)
Inputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]  # one call's q, k, v, num_heads
# Turing, the original study's GTX 1660 Super, and the oldest GPU CUDA 13 builds for: what
# every version runs on unless its row asks for more.
OLDEST_CAPABILITY: Capability = (7, 5)


@dataclass(frozen=True)
class OpKind:
    """An attention op a backend may provide. Every harness stage that measures an op iterates
    over the rows that provide its kind (Backend.provides), never over name patterns."""

    name: str  # "prefill", "decode": what listings and --help say
    op_name: str  # the torch op a CUDA version registers: torch.ops.<namespace>.<op_name>
    description: str


PREFILL = OpKind("prefill", "causal_attention",
                 "causal self-attention of a whole sequence: q, k, v (B, T, C) -> (B, T, C)")
DECODE = OpKind("decode", "decode_attention",
                "one new query row per sequence against a KV cache: q (B, C), k_cache and v_cache "
                "(B, S, C), lengths (B,) -> (B, C)")
KINDS: tuple[OpKind, ...] = (PREFILL, DECODE)


class UnknownBackendError(ValueError):
    """A backend name that is not in the registry."""


class BackendUnavailableError(RuntimeError):
    """The backend cannot run on the requested device; the message says why."""


def capability_text(capability: Capability) -> str:
    return f"{capability[0]}.{capability[1]}"


def arch_digits(capability: Capability, arch_specific: bool = False) -> str:
    """'90', or '90a' for the arch-specific target: the number nvcc's compute_/sm_ names take."""
    return f"{capability[0]}{capability[1]}{'a' if arch_specific else ''}"


@dataclass(frozen=True)
class Target:
    """Where a backend would run: a device type and, for CUDA, its compute capability."""

    device_type: str  # "cuda" or "cpu"
    capability: Capability | None = None  # None: no CUDA device (or not CUDA)

    @staticmethod
    def of(device: torch.device | str) -> "Target":
        device = torch.device(device)
        if device.type == "cuda" and torch.cuda.is_available():
            return Target("cuda", tuple(torch.cuda.get_device_capability(device)))  # type: ignore[arg-type]
        return Target(device.type)


@dataclass(frozen=True, kw_only=True)
class Backend:
    """One attention backend.

    name:                   what users type (`--backend v05`)
    description:            one line for listings and tables
    dtypes:                 the dtypes of q, k and v it accepts (backends/precision.py names)
    dtype_note:             why it accepts no others, in a few words, or None
    requires_cuda:          runs only on a CUDA device
    min_compute_capability: the oldest CUDA GPU it runs on (None: any that torch supports)
    end_to_end:             why the end-to-end sweep leaves it out, or None
    quick:                  why `run_all.sh --quick` (the backend list "quick") leaves it out, or None
    kinds:                  the ops it provides (PREFILL, DECODE)
    ragged_lengths:         decode: True if one call takes sequences of different lengths (it reads
                            `lengths` on the device); False if it attends to every row of the cache
                            it is given, so that the caller passes the cache sliced to the
                            sequences' common length and calls once per sequence where lengths
                            differ (harness/decode_calls.py)
    """

    name: str
    description: str
    dtypes: tuple[str, ...] = precision.EVERY
    dtype_note: str | None = None
    requires_cuda: bool = True
    min_compute_capability: Capability | None = None
    end_to_end: str | None = None
    quick: str | None = None
    kinds: tuple[OpKind, ...] = KINDS
    ragged_lengths: bool = False

    is_version: ClassVar[bool] = False
    compiles: ClassVar[bool] = False  # compiles code at a new shape: precompile() has work to do
    # Made of other rows (StudyPair): measured only where its parts are not measured alone
    # (KV-cache generation), never in the kernel benchmarks, gates or recompute generation.
    composite: ClassVar[bool] = False

    def provides(self, kind: OpKind) -> bool:
        return kind in self.kinds

    def kind_refusal(self, kind: OpKind) -> str | None:
        """None if it provides `kind`, else why not, in a few words."""
        if self.provides(kind):
            return None
        return f"provides no {kind.name} op (it provides {', '.join(k.name for k in self.kinds)})"

    def accepts(self, dtype: str) -> bool:
        return dtype in self.dtypes

    def dtype_refusal(self, dtype: str) -> str | None:
        """None if it accepts `dtype`, else why not: 'not available for float32 (PyTorch's kernel
        accepts float16/bfloat16 only)'."""
        if self.accepts(dtype):
            return None
        return f"not available for {dtype} ({self.dtype_note or 'it accepts ' + ', '.join(self.dtypes)})"

    def why_unavailable(self, target: Target, dtype: str | None = None, kind: OpKind | None = None) -> str | None:
        """None if the backend can run on `target` (in `dtype`, and providing `kind`, when
        given), else the reason, in one line."""
        refusal = (self.kind_refusal(kind) if kind is not None else None) or \
            (self.dtype_refusal(dtype) if dtype is not None else None)
        if refusal:
            return refusal
        if target.device_type != "cuda":
            return f"needs a CUDA device (asked to run on {target.device_type})" if self.requires_cuda else None
        if target.capability is None:
            return "no CUDA device is available"
        mismatch = self.capability_mismatch(target.capability)
        return f"{mismatch}; this GPU is {capability_text(target.capability)}" if mismatch else None

    def capability_mismatch(self, capability: Capability) -> str | None:
        """None if a GPU of `capability` can run it, else what it needs, in a few words: 'needs
        compute capability 8.0 (v15 cp_async)'. Builds and the compile check skip a target with it."""
        needed = self.min_compute_capability
        if needed is None or capability >= needed:
            return None
        return f"needs compute capability {capability_text(needed)} ({self.capability_reason()})"

    def capability_reason(self) -> str:
        """What the minimum compute capability is for, in a few words."""
        return self.name

    def runs_on(self) -> str:
        """Where it can run, for listings: 'CPU or GPU', 'GPU', 'GPU cc >= 8.0', 'GPU cc 9.0 only'
        (cc: the GPU's compute capability, not a CUDA toolkit version)."""
        if not self.requires_cuda:
            return "CPU or GPU"
        if self.min_compute_capability is None:
            return "GPU"
        return f"GPU cc >= {capability_text(self.min_compute_capability)}"

    def attention(self, device: torch.device | str, dtype: str | None = None) -> AttentionFn:
        """The backend as fn(q, k, v, num_heads) -> (B, T, C) for tensors on `device` (of
        `dtype`, when given).

        Raises BackendUnavailableError with the reason if it cannot run there.
        """
        self._check(device, dtype, PREFILL)
        return self._load(torch.device(device))

    def timed_attention(self, device: torch.device | str, dtype: str) -> AttentionFn:
        """The form of the backend the kernel benchmark times (the same as attention() unless a
        row says otherwise, e.g. a compilation per shape)."""
        return self.attention(device, dtype)

    def decode_attention(self, device: torch.device | str, dtype: str | None = None) -> DecodeFn:
        """The backend's decode op as fn(q, k_cache, v_cache, lengths, num_heads) -> (B, C) for
        tensors on `device` (of `dtype`, when given); see `ragged_lengths` for what it does
        with `lengths`.

        Raises BackendUnavailableError with the reason if it cannot run there.
        """
        self._check(device, dtype, DECODE)
        return self._load_decode(torch.device(device))

    def timed_decode(self, device: torch.device | str, dtype: str) -> DecodeFn:
        """The form of the decode op the decode benchmark times (decode_attention() unless a row
        says otherwise)."""
        return self.decode_attention(device, dtype)

    def op(self, kind: OpKind, device: torch.device | str, dtype: str | None = None) -> AttentionFn | DecodeFn:
        """The op of `kind`: attention() for PREFILL, decode_attention() for DECODE."""
        return self.attention(device, dtype) if kind == PREFILL else self.decode_attention(device, dtype)

    def _check(self, device: torch.device | str, dtype: str | None, kind: OpKind) -> None:
        reason = self.why_unavailable(Target.of(device), dtype, kind)
        if reason:
            raise BackendUnavailableError(f"{self.name}: {reason}")

    def prepare_generation(self, model: GPT2, max_tokens: int, *, batch: int = 1, kind: OpKind = PREFILL) -> None:
        """Whatever must happen before `model`, running this backend's ops, generates `batch`
        sequences of up to max_tokens in a timed or captured run, calling the op of `kind` at
        every length up to max_tokens (the prefill op when recomputing, the decode op with a KV
        cache; gpt2/modes.py). Nothing, unless a row says otherwise."""

    def precompile(self, device: torch.device, dtype: str, *, gate: Iterable[Inputs], bench: Iterable[Inputs],
                   generation: tuple[GPT2Config, int] | None) -> None:
        """Compile now what the sweep's stages will compile: the calls the correctness gate
        makes (gate), the calls the kernel benchmark times (bench) and a generation of up to
        generation[1] tokens by a model of generation[0]'s shape. For a backend that compiles
        into on-disk caches, a later process then finds its code there. Nothing, unless a row
        compiles."""

    def _load(self, device: torch.device) -> AttentionFn:
        raise NotImplementedError(f"{type(self).__name__} does not say how to run {self.name}")

    def _load_decode(self, device: torch.device) -> DecodeFn:
        raise NotImplementedError(f"{type(self).__name__} does not say how to run {self.name}'s decode op")


@dataclass(frozen=True, kw_only=True)
class NaiveBaseline(Backend):
    """matmul, masked_fill, softmax, matmul in plain PyTorch."""

    def _load(self, device: torch.device) -> AttentionFn:
        return baselines.naive_attention

    def _load_decode(self, device: torch.device) -> DecodeFn:
        return baselines.naive_decode


@dataclass(frozen=True, kw_only=True)
class SdpaBaseline(Backend):
    """torch's scaled_dot_product_attention pinned to one of its kernels."""

    sdpa_backend: SDPBackend

    def _load(self, device: torch.device) -> AttentionFn:
        return functools.partial(baselines.sdpa_attention, backend=self.sdpa_backend)

    def _load_decode(self, device: torch.device) -> DecodeFn:
        return functools.partial(baselines.sdpa_decode, backend=self.sdpa_backend)


@dataclass(frozen=True, kw_only=True)
class FlexBaseline(Backend):
    """flex_attention compiled by torch.compile (a Triton kernel), causal block mask: one
    dynamic-shape compilation for the gate and generation, one per shape for the benchmark."""

    compiles: ClassVar[bool] = True

    def _load(self, device: torch.device) -> AttentionFn:
        from backends.flex import flex_attention_for

        return flex_attention_for(device)

    def timed_attention(self, device: torch.device | str, dtype: str) -> AttentionFn:
        from backends.flex import flex_attention_for

        self.attention(device, dtype)  # refuses what the row does not run
        return flex_attention_for(torch.device(device), dynamic=False)

    def _load_decode(self, device: torch.device) -> DecodeFn:
        from backends.flex import flex_decode_for

        return flex_decode_for(device)

    # The decode benchmark times the dynamic-shape compilation (decode_attention): one or two
    # compilations per dtype. One per shape would be 20 per dtype; the first decode compilation
    # took about 6 s on an H200 (log results/nvidia-h200/experiments/2026-11-27_2), so about six
    # minutes a sweep, more than the rest of the decode benchmark together.

    def prepare_generation(self, model: GPT2, max_tokens: int, *, batch: int = 1, kind: OpKind = PREFILL) -> None:
        weight = next(model.parameters())
        if kind == DECODE:
            from backends.flex import flex_decode_for

            flex_decode_for(weight.device).prepare(max_tokens, dtype=weight.dtype, num_heads=model.config.n_head,
                                                   width=model.config.n_embd, batch=batch)
        else:
            self._prepare_lengths(weight.device, weight.dtype, model.config, max_tokens, batch)

    @staticmethod
    def _prepare_lengths(device: torch.device, dtype: torch.dtype, config: GPT2Config, max_tokens: int,
                         batch: int = 1) -> None:
        from backends.flex import flex_attention_for

        flex_attention_for(device).prepare(max_tokens, dtype=dtype, num_heads=config.n_head, width=config.n_embd,
                                           batch=batch)

    def precompile(self, device: torch.device, dtype: str, *, gate: Iterable[Inputs], bench: Iterable[Inputs],
                   generation: tuple[GPT2Config, int] | None) -> None:
        dynamic, static = self.attention(device, dtype), self.timed_attention(device, dtype)
        for q, k, v, num_heads in gate:
            dynamic(q, k, v, num_heads)
        for q, k, v, num_heads in bench:
            static(q, k, v, num_heads)
        if generation is not None:
            config, max_tokens = generation
            self._prepare_lengths(torch.device(device), precision.torch_dtype(dtype), config, max_tokens)


@dataclass(frozen=True, kw_only=True)
class KernelVersion(Backend):
    """One step of the study: versions/<folder>/attention.cu built as a torch extension with
    the torch glue of its op kind (versions/common/); CudaVersion (prefill) and DecodeVersion
    say which.

    number, folder:  the step's number in its track and its folder: v05 in
                     versions/v05_warp_shuffle/ (float32 track), h01 in versions/h01_.../
                     (half-precision track, dtypes float16 and bfloat16), d01 in
                     versions/d01_.../ (decode track, every dtype)
    parent:          the version this step changes (its diff is read against it), or None
    build_flags:     extra nvcc flags for the version's kernel file
    strided_inputs:  True if the op accepts row/batch-strided q, k, v (the model then
                     passes the views of its packed qkv projection without copying)
    alignment_bytes: q, k and v's data pointers and strides (in bytes) must be multiples of
                     it; 16 where the kernel loads 16-byte vectors, and the op refuses others
    arch_specific:   a compute capability C when the kernel uses instructions that exist only
                     in C's arch-specific target (wgmma: sm_90a for 9.0): the version is built
                     for sm_<C>a alone, without PTX, and runs only on a GPU of capability C
                     exactly, neither older nor newer; min_compute_capability is then C too.
                     None: built for the portable sm_XY of each target from
                     min_compute_capability up

    strided_inputs and alignment_bytes repeat what the kernel file's requirements() says
    (the glue enforces that); the compile check compares the two.
    """

    number: int
    folder: str
    dtypes: tuple[str, ...] = (precision.FLOAT32,)
    parent: str | None = None
    build_flags: tuple[str, ...] = ()
    strided_inputs: bool = False
    alignment_bytes: int = 4  # one float
    min_compute_capability: Capability = OLDEST_CAPABILITY
    arch_specific: Capability | None = None

    is_version: ClassVar[bool] = True
    op_kind: ClassVar[OpKind]  # the one op its kernel file implements
    glue_file: ClassVar[str]  # the torch glue it is linked with, in versions/common/
    launch_header: ClassVar[str]  # the launcher contract its kernel file implements, in versions/common/
    probe_file: ClassVar[str]  # the compile check's launch probe, in harness/probe/

    @property
    def half_precision(self) -> bool:
        """A step of the half-precision track: its kernel file implements the launcher contract
        for 16-bit inputs only (versions/common/attention_launch.h, HalfArgs)."""
        return self.dtypes == precision.HALF

    @property
    def glue_defines(self) -> tuple[str, ...]:
        """Macros the torch glue and the launch probe are compiled with: which launcher
        contract the kernel file implements."""
        return ("-DATTN_HALF_PRECISION",) if self.half_precision else ()

    def __post_init__(self) -> None:
        if self.arch_specific is not None and self.min_compute_capability != self.arch_specific:
            raise ValueError(f"{self.name}: built only for sm_{arch_digits(self.arch_specific, True)}, so its "
                             f"min_compute_capability must be {capability_text(self.arch_specific)}, not "
                             f"{capability_text(self.min_compute_capability)}")

    @property
    def namespace(self) -> str:
        """The torch op namespace: torch.ops.<namespace>.<op_kind.op_name>."""
        return f"flash_{self.name}"

    @property
    def source_dir(self) -> Path:
        return VERSIONS_DIR / self.folder

    @property
    def input_layout(self) -> str:
        """What q, k and v must look like, for listings: 'contiguous', 'any row/batch strides,
        16-byte aligned'."""
        layout = "any row/batch strides" if self.strided_inputs else "contiguous"
        return layout if self.alignment_bytes <= 4 else f"{layout}, {self.alignment_bytes}-byte aligned"

    @property
    def step(self) -> str:
        """The step's short name: 'cp_async' for versions/v15_cp_async."""
        return self.folder.removeprefix(f"{self.name}_")

    def capability_reason(self) -> str:
        return f"{self.name} {self.step}"

    def capability_mismatch(self, capability: Capability) -> str | None:
        needed = self.arch_specific
        if needed is None:
            return super().capability_mismatch(capability)
        if capability == needed:
            return None
        return (f"needs compute capability {capability_text(needed)} exactly ({self.capability_reason()}: "
                f"sm_{arch_digits(needed, True)} code runs on no other GPU)")

    def runs_on(self) -> str:
        if self.arch_specific is None:
            return super().runs_on()
        return f"GPU cc {capability_text(self.arch_specific)} only"


@dataclass(frozen=True, kw_only=True)
class CudaVersion(KernelVersion):
    """A step of a prefill track (v.., h..): torch.ops.<namespace>.causal_attention."""

    kinds: tuple[OpKind, ...] = (PREFILL,)

    op_kind: ClassVar[OpKind] = PREFILL
    glue_file: ClassVar[str] = "torch_glue.cpp"
    launch_header: ClassVar[str] = "attention_launch.h"
    probe_file: ClassVar[str] = "launch_config_probe.cpp"

    def _load(self, device: torch.device) -> AttentionFn:
        from backends.extension import load_op

        op = load_op(self)
        if self.strided_inputs:
            return op

        def contiguous_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
            return op(q.contiguous(), k.contiguous(), v.contiguous(), num_heads)  # free when contiguous

        return contiguous_op


@dataclass(frozen=True, kw_only=True)
class DecodeVersion(KernelVersion):
    """A step of the decode track (d..): torch.ops.<namespace>.decode_attention, one kernel
    template for float32, bfloat16 and float16 (versions/common/decode_launch.h). Every
    decode version takes ragged lengths on the device and strided caches."""

    kinds: tuple[OpKind, ...] = (DECODE,)
    dtypes: tuple[str, ...] = precision.EVERY
    ragged_lengths: bool = True
    strided_inputs: bool = True

    op_kind: ClassVar[OpKind] = DECODE
    glue_file: ClassVar[str] = "decode_glue.cpp"
    launch_header: ClassVar[str] = "decode_launch.h"
    probe_file: ClassVar[str] = "decode_config_probe.cpp"

    def _load_decode(self, device: torch.device) -> DecodeFn:
        from backends.extension import load_op

        return load_op(self)  # type: ignore[return-value]


@dataclass(frozen=True, kw_only=True)
class StudyPair(Backend):
    """The study's own kernels as one backend for KV-cache generation: in each dtype the last
    prefill version of the track that takes it (v.. in float32, h.. in bfloat16 and float16)
    prefills the prompt, and the last decode version (d..) attends for each new token. Found
    in the registry when asked, so a new version joins it without an edit here."""

    composite: ClassVar[bool] = True

    def parts(self, dtype: str) -> tuple[CudaVersion, DecodeVersion]:
        """(prefill version, decode version) for `dtype`; BackendUnavailableError if a track
        has no version that takes it."""
        prefill = [v for v in versions() if v.accepts(dtype)]
        decode = [v for v in decode_versions() if v.accepts(dtype)]
        if not prefill or not decode:
            raise BackendUnavailableError(f"{self.name}: no {'prefill' if not prefill else 'decode'} version takes "
                                          f"{dtype}")
        return prefill[-1], decode[-1]

    def describe_parts(self, dtype: str) -> str:
        """'v29 + d05' for float32."""
        prefill, decode = self.parts(dtype)
        return f"{prefill.name} + {decode.name}"

    def why_unavailable(self, target: Target, dtype: str | None = None, kind: OpKind | None = None) -> str | None:
        own = super().why_unavailable(target, dtype, kind)
        if own or dtype is None:
            return own
        try:
            parts = self.parts(dtype)
        except BackendUnavailableError as err:
            return str(err).removeprefix(f"{self.name}: ")
        for part in parts:
            reason = part.why_unavailable(target, dtype)
            if reason:
                return f"{part.name}: {reason}"
        return None

    def attention(self, device: torch.device | str, dtype: str | None = None) -> AttentionFn:
        self._check(device, dtype, PREFILL)
        return self.parts(self._dtype(dtype))[0].attention(device, dtype)

    def decode_attention(self, device: torch.device | str, dtype: str | None = None) -> DecodeFn:
        self._check(device, dtype, DECODE)
        return self.parts(self._dtype(dtype))[1].decode_attention(device, dtype)

    def _dtype(self, dtype: str | None) -> str:
        if dtype is None:
            raise BackendUnavailableError(f"{self.name}: its parts depend on the dtype; name one")
        return dtype


# The two prefill tracks' name prefixes: v05 (float32), h01 (float16 and bfloat16).
TRACK_PREFIX = {(precision.FLOAT32,): "v", precision.HALF: "h"}
DECODE_PREFIX = "d"  # the decode track: d01, d02, ... (every dtype)


def _decode_version(number: int, short_name: str, description: str, *, parent: str | None = None,
                    build_flags: tuple[str, ...] = (), alignment_bytes: int = 16,
                    min_compute_capability: Capability | None = None,
                    arch_specific: Capability | None = None) -> DecodeVersion:
    """A decode version's row (d01, d02, ...); parent and capability as _version's."""
    name = f"{DECODE_PREFIX}{number:02d}"
    if parent is None and number > 1:
        parent = f"{DECODE_PREFIX}{number - 1:02d}"
    return DecodeVersion(name=name, description=description, number=number, parent=parent,
                         folder=f"{name}_{short_name}", build_flags=build_flags, alignment_bytes=alignment_bytes,
                         min_compute_capability=min_compute_capability or arch_specific or OLDEST_CAPABILITY,
                         arch_specific=arch_specific)


def _version(number: int, short_name: str, description: str, *, dtypes: tuple[str, ...] = (precision.FLOAT32,),
             parent: str | None = None, build_flags: tuple[str, ...] = (),
             strided_inputs: bool = False, alignment_bytes: int = 4,
             min_compute_capability: Capability | None = None,
             arch_specific: Capability | None = None) -> CudaVersion:
    """A version's row. Its parent defaults to the previous step of its track (none for step 1);
    min_compute_capability defaults to arch_specific if given, else the oldest."""
    prefix = TRACK_PREFIX[dtypes]
    name = f"{prefix}{number:02d}"
    if parent is None and number > 1:
        parent = f"{prefix}{number - 1:02d}"
    return CudaVersion(name=name, description=description, dtypes=dtypes, number=number, parent=parent,
                       folder=f"{name}_{short_name}", build_flags=build_flags, strided_inputs=strided_inputs,
                       alignment_bytes=alignment_bytes,
                       min_compute_capability=min_compute_capability or arch_specific or OLDEST_CAPABILITY,
                       arch_specific=arch_specific)


_HALF_ONLY = "PyTorch's kernel accepts float16/bfloat16 only"
_FAST_MATH = ("--use_fast_math",)
_FLOAT4 = 16  # alignment_bytes of a kernel that loads q, k, v as 16-byte vectors
_AMPERE: Capability = (8, 0)  # cp.async and TF32 mma.sync
_HOPPER: Capability = (9, 0)  # wgmma, which exists only in the arch-specific target sm_90a

BACKENDS: tuple[Backend, ...] = (
    NaiveBaseline(name="naive", description="matmul, masked_fill, softmax, matmul in plain PyTorch",
                  requires_cuda=False),
    SdpaBaseline(name="sdpa-math", description="PyTorch SDPA pinned to the math backend",
                 requires_cuda=False, sdpa_backend=SDPBackend.MATH),
    SdpaBaseline(name="sdpa-efficient", description="PyTorch SDPA pinned to the memory-efficient backend",
                 sdpa_backend=SDPBackend.EFFICIENT_ATTENTION),
    SdpaBaseline(name="sdpa-flash", description="PyTorch SDPA pinned to the FlashAttention backend",
                 sdpa_backend=SDPBackend.FLASH_ATTENTION, dtypes=precision.HALF, dtype_note=_HALF_ONLY),
    SdpaBaseline(name="sdpa-cudnn", description="PyTorch SDPA pinned to the cuDNN backend",
                 sdpa_backend=SDPBackend.CUDNN_ATTENTION, dtypes=precision.HALF, dtype_note=_HALF_ONLY),
    FlexBaseline(name="flex-attention",
                 description="flex_attention compiled by torch.compile (Triton), causal block mask; float32 as "
                             "3 x TF32 (as accurate as sdpa-efficient)",
                 quick="left out of --quick: compiling it takes about two minutes on a fresh H100 machine "
                       "(measured), most of the quick sweep's budget; the full sweep measures it"),
    StudyPair(name="study", description="the study's own kernels for KV-cache generation: the last prefill "
              "version of the dtype's track for the prompt, the last decode version for each new token"),
    _version(1, "flash_naive", "FlashAttention v1, statistics in global memory, 48x48 tiles"),
    _version(2, "pad_k", "K rows padded by one float in shared memory (no bank conflicts)"),
    _version(3, "tile_32x32", "32x32 thread block, 32x32 tiles"),
    _version(4, "fast_math", "built with --use_fast_math", build_flags=_FAST_MATH),
    _version(5, "warp_shuffle", "softmax statistics by warp shuffles, in registers",
             build_flags=_FAST_MATH),
    _version(6, "templated", "template tile sizes, division hoisted, restrict pointers",
             build_flags=_FAST_MATH),
    _version(7, "float4", "128-bit vectorized global loads and stores", build_flags=_FAST_MATH,
             alignment_bytes=_FLOAT4),
    _version(8, "o_in_smem", "O accumulated in shared memory, written once",
             build_flags=_FAST_MATH, alignment_bytes=_FLOAT4),
    _version(9, "regtile_cols", "2 columns of S and 4 of O per thread (16x32 block)",
             build_flags=_FAST_MATH, alignment_bytes=_FLOAT4),
    _version(10, "regtile_rows", "2x2 register tile per thread, B_r = 64",
             build_flags=_FAST_MATH, alignment_bytes=_FLOAT4),
    _version(11, "strided", "row/batch strides as arguments: no .contiguous() copies",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4),
    # Past the original write-up: its author's version 12, then toward the tensor cores.
    _version(12, "o_in_registers", "O in registers, K swizzled, 64x64 tiles, 4x4 register tile",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4),
    _version(13, "causal_tiles", "only the diagonal tile masked; longest row blocks first",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4),
    _version(14, "warp_rows", "FlashAttention-2 split: each warp owns whole rows, P in registers",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4),
    _version(15, "cp_async", "K/V double-buffered with cp.async (one barrier per tile)",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             min_compute_capability=_AMPERE),
    _version(16, "tf32x3_mma", "both products on tensor cores, 3 x TF32 for float32 accuracy",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             min_compute_capability=_AMPERE),
    _version(17, "split_kv", "keys split across blocks when the grid would leave SMs idle",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             min_compute_capability=_AMPERE),
    _version(18, "wgmma", "version 17 on Hopper's asynchronous warpgroup MMA (wgmma, sm_90a)",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             arch_specific=_HOPPER),
    _version(19, "producer_split", "version 18 warp-specialized: a producer warpgroup splits each K/V tile once "
             "for two consumer warpgroups (128 rows) that take turns at the tensor cores",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(20, "head_groups", "version 19 with its blocks launched in groups of heads sized to the L2 "
             "(h08's order): each head's K and V read from DRAM about once",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(21, "narrow_kernel", "version 20 with 64-row blocks in a kernel of their own where they fit in two "
             "waves of the SMs (B=1, T <= 1408): one consumer and the splitting producer, no turns, no merge",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(22, "pv_behind_softmax", "version 21's narrow kernel with P V of the last tile issued behind this "
             "tile's S, so that it runs during the softmax; K and V of a stage released apart",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(23, "split_loads_first", "version 22 with the producer's split passes reading the whole raw tile "
             "before writing any part: the compiler had kept each read behind the last store (possible "
             "aliasing), so the passes ran one after the other", build_flags=_FAST_MATH, strided_inputs=True,
             alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(24, "merge_in_kernel", "version 23 with the narrow blocks' keys cut into pieces where one wave leaves "
             "SMs idle (B=1, T <= 704): the last piece of a row block to finish merges the others in the "
             "kernel (an atomic counter per row block), no second launch", build_flags=_FAST_MATH,
             strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(25, "q_by_copies", "version 24 with the narrow kernel's Q copied in 16-byte chunks to shared memory "
             "and read from there into the A fragments, not loaded by 32 scalar loads per thread: off the "
             "critical path of every narrow block's start", build_flags=_FAST_MATH, strided_inputs=True,
             alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(26, "merge_in_cluster", "version 25 with the two pieces of a split narrow row block launched "
             "as a cluster of two: the shorter piece stores its partial result into the other's shared "
             "memory (st.async), which merges it on chip; no counters, no workspace",
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(27, "shorter_merging_piece", "version 26 with piece 0 of a split narrow row block, the one that "
             "merges, a tile shorter where piece 1 can take the rest, so that the unsplit row blocks end the "
             "call", build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(28, "cut_saving_two_tiles", "version 27 cutting narrow row blocks into pieces wherever that "
             "shortens the longest chain by 2 tiles, not 3: the merge on chip costs less than a tile "
             "(B=1: T=193-320 now in pieces)", build_flags=_FAST_MATH, strided_inputs=True,
             alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(29, "raw_k_is_k_hi", "version 28 with raw K as K's hi part in the narrow kernel (the tensor "
             "cores read its top 19 bits): K's split pass writes lo alone, half its shared-memory "
             "stores", build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             arch_specific=_HOPPER),
    # The half-precision track: bfloat16 and float16 in and out, float32 accumulation.
    _version(1, "mma_sync", "version 17 in 16 bits: one mma.sync m16n8k16 per product, fragments by ldmatrix",
             dtypes=precision.HALF, parent="v17", build_flags=_FAST_MATH, strided_inputs=True,
             alignment_bytes=_FLOAT4, min_compute_capability=_AMPERE),
    _version(2, "wgmma_tma", "h01 on Hopper's warpgroup MMA, K/V tiles by the tensor memory accelerator",
             dtypes=precision.HALF, build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             arch_specific=_HOPPER),
    _version(3, "warp_specialized", "h02 warp-specialized: a TMA producer, two consumers in ping-pong, S of "
             "the next tile before this softmax", dtypes=precision.HALF, build_flags=_FAST_MATH, strided_inputs=True,
             alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(4, "three_consumers", "h03 with three consumer warpgroups: 192 rows per block, more warps to "
             "hide the softmax's latency", dtypes=precision.HALF, build_flags=_FAST_MATH, strided_inputs=True,
             alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(5, "exp2_fma", "h04 with one exponential in 8 computed by a polynomial on the FMA pipe",
             dtypes=precision.HALF, build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             arch_specific=_HOPPER),
    _version(6, "persistent", "h04 on a persistent grid: each block walks work items, the next one's loads "
             "overlapping this one's end", dtypes=precision.HALF, parent="h04", build_flags=_FAST_MATH,
             strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(7, "head_major", "h04 with its blocks launched head by head: each head's K and V read from DRAM "
             "about once, then from L2", dtypes=precision.HALF, parent="h04", build_flags=_FAST_MATH,
             strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(8, "head_groups", "h07 with the heads in groups sized to L2, each group's blocks longest-first: "
             "h07's locality with h04's balance", dtypes=precision.HALF, build_flags=_FAST_MATH,
             strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(9, "dependent_launch", "h08 with the merge kernel launched as a programmatic dependent: its "
             "blocks wait on the device instead of behind a launch gap", dtypes=precision.HALF,
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(10, "work_queue", "h09 on a persistent grid whose blocks draw their next work item from an atomic "
             "counter: h06's overlapped item starts with the hardware's greedy balance", dtypes=precision.HALF,
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(11, "one_wave_splits", "h10 with its keys split one tile longer where that fits every work item "
             "in one wave (B=1, T=1024: 120 items of up to 4 tiles instead of 144 of 3)", dtypes=precision.HALF,
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(12, "diagonal_halves", "h11 with the diagonal tile's softmax specialised by the half its rows lie "
             "in: the masked half's scores skipped, one compare for the triangle", dtypes=precision.HALF,
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(13, "rows_from_the_end", "h12 with its row blocks laid from T's end: the partial row block is the "
             "first (one or two key tiles), not the last, whose empty warpgroups walked every key tile (B=8 "
             "T=4096: 363 tiles per head instead of 384)", dtypes=precision.HALF, build_flags=_FAST_MATH,
             strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(14, "narrow_rows", "h13 with 64-row blocks, one warpgroup computing, where all of them fit on "
             "the SMs at once (B=1, T <= 704): short chains, no split and no merge", dtypes=precision.HALF,
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(15, "narrow_two_waves", "h14 with its 64-row blocks used where they take up to two waves of the "
             "SMs (B=1, T <= 1408), not one: the second wave is the short blocks", dtypes=precision.HALF,
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(16, "narrow_kernel", "h15 with its 64-row blocks in a kernel of their own: one consumer warpgroup "
             "and a producer warp, no turns to wait for", dtypes=precision.HALF, build_flags=_FAST_MATH,
             strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(17, "s_one_tile_ahead", "h16's narrow kernel with S of the next tile issued before this tile's "
             "softmax (two S buffers): the softmax never waits for its S", dtypes=precision.HALF,
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(18, "narrow_three_waves", "h17 with its narrow row blocks used where they take up to three waves of "
             "the SMs (B=1, T <= 2112): the narrow kernel's tiles now beat the split plan there", dtypes=precision.HALF,
             build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4, arch_specific=_HOPPER),
    _version(19, "items_back_to_back", "h18's three-consumer kernel with an item's last P V issued in the next "
             "item's first turn, behind its S_0: no turn at the tensor cores with one product alone",
             dtypes=precision.HALF, build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             arch_specific=_HOPPER),
    _version(20, "row_sums_by_tensor_cores", "h19's three-consumer kernel with the softmax's row sums computed "
             "by the tensor cores: P V against V and 8 columns of ones (m64n72k16), no FADDs per score",
             dtypes=precision.HALF, build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             arch_specific=_HOPPER),
    _version(21, "lean_step", "h20's three-consumer kernel with fewer instructions per step: O rescaled only "
             "when a row's maximum grows by more than 2^8 (lazy rescale), wgmma descriptors stepped by one add",
             dtypes=precision.HALF, build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             arch_specific=_HOPPER),
    _version(22, "exponentials_first", "h21's three-consumer kernel with the exponentials of an unmasked tile "
             "before its maximum: P with the rows' m, the largest exponent checked beside the MUFU, S again by "
             "mma.sync on the rare tile where it grew past 2^8",
             dtypes=precision.HALF, build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             arch_specific=_HOPPER),
    _version(23, "or_of_the_exponentials", "h22's three-consumer kernel with the grown-maximum check made of P "
             "itself (P scaled by 2^-7, so a row grew past 2^8 where P's bit 30 is set: one OR, no FMNMX), and "
             "the exponentials first on the masked tiles too",
             dtypes=precision.HALF, build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             arch_specific=_HOPPER),
    _version(24, "two_short_blocks_per_sm", "h23 with a short form of the narrow kernel for T <= 256 (one S "
             "buffer, two K/V stages: 160 registers, 73 KB), two blocks per SM; the plan counts them, so batched "
             "short prompts (B=64 T=64, B=32 T=128, B=16 T=256) run narrow blocks instead of 192-row ones",
             dtypes=precision.HALF, build_flags=_FAST_MATH, strided_inputs=True, alignment_bytes=_FLOAT4,
             arch_specific=_HOPPER),
    # The decode track: one query row per sequence against a KV cache, every dtype.
    _decode_version(1, "one_block_per_head", "one block per (sequence, head) streams K and V in 16-byte vectors, "
                    "an online softmax per group of lanes, the groups merged in shared memory",
                    build_flags=_FAST_MATH),
    _decode_version(2, "split_sequence", "d01 with each head's cached rows cut into pieces, one block each, "
                    "planned from (B, H, S, SM count); a second kernel merges the pieces (flash-decoding)",
                    build_flags=_FAST_MATH),
    _decode_version(3, "merge_in_cluster", "d02 with a head's pieces one thread-block cluster: block 0 merges "
                    "the others' partial results through distributed shared memory, in the same launch",
                    build_flags=_FAST_MATH, min_compute_capability=_HOPPER),
    _decode_version(4, "copies_in_flight", "d03 with K and V tiles copied by cp.async into a ring of four "
                    "shared-memory stages: three tiles (48 KB) in flight per block while one is computed",
                    build_flags=_FAST_MATH, min_compute_capability=_HOPPER),
    _decode_version(5, "plan_from_lengths", "d04 with each piece's rows planned on the device from the "
                    "sequence's own length, not the cache's: a sequence shorter than its cache uses every "
                    "block of its cluster", build_flags=_FAST_MATH, min_compute_capability=_HOPPER),
    _decode_version(6, "rows_of_a_tile_at_once", "d05 with each group of lanes taking its four rows of a tile "
                    "side by side: four scores, one maximum and one rescale per tile, not one chain per row",
                    build_flags=_FAST_MATH, min_compute_capability=_HOPPER),
    _decode_version(7, "one_wave_of_pieces", "d06 with the pieces planned to fill one wave of the block "
                    "slots, up to 16 per head (a non-portable cluster): batch 8 no longer spills into a "
                    "second wave, batch 1 reaches every SM", build_flags=_FAST_MATH,
                    min_compute_capability=_HOPPER),
    _decode_version(8, "rows_in_registers", "d07 with K and V loaded straight into registers, four rows per "
                    "thread per step and the next step's rows issued before this step's are computed: no "
                    "shared-memory ring, no barrier per tile, 16 warps per SM", build_flags=_FAST_MATH,
                    min_compute_capability=_HOPPER),
    _decode_version(9, "blocks_stay", "d08 with one block per slot where the heads fill a wave or more: "
                    "each block takes head after head, loading the next head's length, q and first rows "
                    "before it merges this one", build_flags=_FAST_MATH, min_compute_capability=_HOPPER),
    _decode_version(10, "tiles_by_copy", "d09 with, in 16-bit types where the heads fill a wave and the caches "
                    "hold 2048 rows or more, one 128-thread block per head reading K and V in 16 KB tiles by cp.async, two "
                    "stages, three blocks per SM: cuDNN's schedule, which reads the caches faster",
                    build_flags=_FAST_MATH, min_compute_capability=_HOPPER),
)

# The backends others are measured against, each named once.
# Kernel benchmark: ratios of device time, per dtype. In float32 the fastest float32-accurate
# kernel PyTorch has; in half precision cuDNN's fused attention, the fastest on Hopper.
KERNEL_REFERENCES = {precision.FLOAT32: "sdpa-efficient", precision.BFLOAT16: "sdpa-cudnn",
                     precision.FLOAT16: "sdpa-cudnn"}
KERNEL_REFERENCE = KERNEL_REFERENCES[precision.FLOAT32]
TOKENS_REFERENCE = "naive"  # end to end: every backend's tokens are compared with its tokens (same dtype)
# Half precision: a backend's error may be at most 1.25x the better of these on the same inputs
# (harness/reference.py).
HALF_PRECISION_VENDORS = ("sdpa-flash", "sdpa-cudnn")


def kernel_reference(dtype: str) -> str:
    return KERNEL_REFERENCES[dtype]


def names() -> list[str]:
    return [b.name for b in BACKENDS]


def get(name: str) -> Backend:
    for backend in BACKENDS:
        if backend.name == name:
            return backend
    raise UnknownBackendError(f"unknown backend {name!r}; valid backends: {', '.join(names())}")


def kernel_versions() -> list[KernelVersion]:
    """Every CUDA version of every track (what builds and the compile check iterate over)."""
    return [b for b in BACKENDS if isinstance(b, KernelVersion)]


def decode_versions() -> list[DecodeVersion]:
    return [b for b in BACKENDS if isinstance(b, DecodeVersion)]


def versions() -> list[CudaVersion]:
    return [b for b in BACKENDS if isinstance(b, CudaVersion)]


def baseline_names(kind: OpKind = PREFILL) -> list[str]:
    """PyTorch's own kernels that provide `kind` (naive, the SDPA backends, flex-attention), in
    registry order: the options every ratio's reference is the fastest of. Not the versions,
    nor a composite row, whose parts are versions."""
    return [b.name for b in providing(BACKENDS, kind) if not b.is_version]


def track_of(version: KernelVersion) -> list[KernelVersion]:
    """The versions of `version`'s track, in order: the kernel versions of its kind (prefill or
    decode) that take the same dtypes (float32's v01..., half precision's h01..., decode's d01...)."""
    return [v for v in kernel_versions() if type(v) is type(version) and v.dtypes == version.dtypes]


def last_versions(kind: OpKind = PREFILL) -> list[KernelVersion]:
    """The last version of each track of `kind`, in registry order (prefill: float32's v.. and
    half precision's h..): what the kernel benchmark's prefill grid measures beside PyTorch's
    kernels (harness/kernel_plan.py)."""
    return [v for v in kernel_versions() if v.provides(kind) and track_of(v)[-1] is v]


def quick_refusal(backend: Backend) -> str | None:
    """Why `run_all.sh --quick` leaves `backend` out, or None if a quick sweep measures it: the
    row's own reason (flex-attention's compile time), or for a version between its track's
    first and last that a quick sweep measures the track's two ends, to stay within minutes."""
    if backend.quick:
        return backend.quick
    if isinstance(backend, KernelVersion):
        track = track_of(backend)
        if backend is not track[0] and backend is not track[-1]:
            return (f"left out of --quick, which measures each track's first and last versions "
                    f"({track[0].name}, {track[-1].name}); the full sweep measures every version")
    return None


def select(spec: str | None) -> list[Backend]:
    """Backends named in a comma-separated list ("naive,v05"), all of them for None/"all", or
    for "quick" all but those a quick sweep leaves out (quick_refusal); a list that names none
    ('') is refused (UnknownBackendError), not taken for all, and so is one that names a backend
    twice."""
    if spec is None or spec.strip() == "all":
        return list(BACKENDS)
    if spec.strip() == "quick":
        return [b for b in BACKENDS if quick_refusal(b) is None]
    names = [part.strip() for part in spec.split(",") if part.strip()]
    if not names:  # '' or ',': never 'every backend'
        raise UnknownBackendError(f"{spec!r} names no backend: give comma-separated names, 'all' or 'quick'")
    named = [get(name) for name in names]
    repeated = arguments.repeated(names)
    if repeated:  # each would be built, checked and timed twice, its rows written twice
        raise UnknownBackendError(f"{spec!r} names {', '.join(repeated)} more than once: name each backend once")
    return named


def with_required(backends: Iterable[Backend], required: str) -> list[Backend]:
    """`backends` with the registry row `required` put first (added if missing)."""
    others = [b for b in backends if b.name != required]
    return [get(required), *others]


def providing(backends: Iterable[Backend], kind: OpKind, *, composites: bool = False) -> list[Backend]:
    """The rows among `backends` that provide `kind`; composites (StudyPair) only if asked:
    their parts are measured alone."""
    return [b for b in backends if b.provides(kind) and (composites or not b.composite)]


def partition(backends: Iterable[Backend], target: Target, dtype: str | None = None,
              kind: OpKind | None = None) -> tuple[list[Backend], dict[str, str]]:
    """The backends that can run on `target` (in `dtype`, and providing `kind`, when given),
    and for the others the reason why not."""
    runnable, unavailable = [], {}
    for backend in backends:
        reason = backend.why_unavailable(target, dtype, kind)
        if reason:
            unavailable[backend.name] = reason
        else:
            runnable.append(backend)
    return runnable, unavailable
