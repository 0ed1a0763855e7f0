"""Kernel variants: a version's kernel file with patches applied, built as its own extension.

A change is tried as a variant before it becomes a step of the study: compiled, checked
against float64 and timed beside the version it changes (`python -m harness try`). A
variant is written NAME=VERSION+PATCH[+PATCH...]: the patches (unified diffs of
versions/<folder>/attention.cu, as `git diff` writes them) are applied in order with
`git apply` to a copy of VERSION's file, kept in build/variants/NAME/. The variant keeps
VERSION's registry row (build flags, input requirements, minimum compute capability,
arch-specific target) under its own name, so its op is torch.ops.flash_NAME.causal_attention.
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from backends import registry
from backends.extension import BUILD_ROOT
from backends.registry import PROJECT_ROOT, KernelVersion

VARIANTS_DIR = BUILD_ROOT / "variants"
KERNEL_FILE = "attention.cu"
SPEC_FORM = "NAME=VERSION+PATCH[+PATCH...], e.g. v16p=v16+experiments/v16/v16_1_k_float2.patch"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")  # the suffix of a C++ namespace: flash_NAME


class VariantError(ValueError):
    """A variant that cannot be made; the message names it and says why."""


@dataclass(frozen=True)
class VariantSpec:
    name: str
    base: KernelVersion  # a prefill (CudaVersion) or decode (DecodeVersion) step
    patches: tuple[Path, ...]  # applied in this order


def parse_spec(text: str, *, cwd: Path | None = None) -> VariantSpec:
    """NAME=VERSION+PATCH[+PATCH...]; patch paths relative to `cwd` (default: the current folder)."""
    name, sep, rest = text.partition("=")
    if not sep or not rest:
        raise VariantError(f"{text!r}: write a variant as {SPEC_FORM}")
    if not _NAME.match(name):
        raise VariantError(f"{name!r}: a variant's name must be lowercase letters, digits and _, starting with a "
                           "letter, at most 32 characters (it names the op's namespace, flash_NAME)")
    if name in registry.names():
        raise VariantError(f"{name!r} is a backend of the registry; give the variant a name of its own")
    base_name, *patch_texts = rest.split("+")
    try:
        base = registry.get(base_name)
    except registry.UnknownBackendError as err:
        raise VariantError(f"{name}: {err}") from None
    if not isinstance(base, KernelVersion):
        raise VariantError(f"{name}: {base_name} is a baseline; only a CUDA version has a kernel file to patch")
    if not patch_texts or not all(patch_texts):
        raise VariantError(f"{text!r}: name one or more patches after the version: {SPEC_FORM}")
    patches = []
    for patch_text in patch_texts:
        path = Path(patch_text)
        path = path if path.is_absolute() else (cwd or Path.cwd()) / path
        if path.is_dir():
            raise VariantError(f"{name}: the patch {patch_text!r} is a folder: name a patch file")
        if not path.is_file():
            raise VariantError(f"{name}: no patch file {patch_text!r}")
        try:
            empty = not path.read_bytes().strip()
        except OSError as err:
            raise VariantError(f"{name}: the patch {patch_text!r} cannot be read ({err.strerror})") from None
        if empty:
            raise VariantError(f"{name}: the patch {patch_text!r} is empty: nothing to apply")
        patches.append(path.resolve())
    return VariantSpec(name, base, tuple(patches))


def patched_source(spec: VariantSpec) -> str:
    """VERSION's kernel file with the patches applied in order.

    git apply runs in a temporary folder outside any repository, where the file sits at
    the path the patches name (versions/<folder>/attention.cu).
    """
    relative = spec.base.source_dir.relative_to(PROJECT_ROOT) / KERNEL_FILE
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}  # no repository of ours
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / relative
        target.parent.mkdir(parents=True)
        shutil.copyfile(spec.base.source_dir / KERNEL_FILE, target)
        for index, patch in enumerate(spec.patches):
            try:
                proc = subprocess.run(["git", "apply", str(patch)], cwd=tmp, env=env, capture_output=True, text=True)
            except FileNotFoundError:
                raise VariantError("git is not on PATH: applying a variant's patches needs it") from None
            if proc.returncode != 0:
                after = f" after {', '.join(p.name for p in spec.patches[:index])}" if index else ""
                raise VariantError(f"{spec.name}: {patch.name} does not apply to {relative}{after}:\n"
                                   f"{proc.stderr.strip()}")
        return target.read_text()


def materialize(spec: VariantSpec, root: Path | None = None) -> KernelVersion:
    """Write the variant's kernel file to root/NAME/ (default root: build/variants; the file
    is untouched if unchanged, so the build stays incremental) and return its registry
    row: VERSION's, under the variant's name."""
    source = patched_source(spec)
    folder = (root or VARIANTS_DIR) / spec.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / KERNEL_FILE
    if not path.exists() or path.read_text() != source:
        path.write_text(source)
    patches = " + ".join(p.name for p in spec.patches)
    return dataclasses.replace(spec.base, name=spec.name, description=f"{spec.base.name} + {patches}",
                               folder=str(folder.resolve()))
