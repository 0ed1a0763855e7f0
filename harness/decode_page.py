"""The decode and KV-cache sections of a GPU's page (harness/gpu_page.py's SECTIONS): the decode
benchmark's grid per dtype against the fastest of PyTorch's kernels of the same run, the ragged
batches, the copy's rate, the decode gate; KV-cache generation per dtype and plan. A GPU
without those rows gets a line saying it has not measured them yet.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from backends.registry import HEAD_DIM, TOKENS_REFERENCE
from harness import hf_generate
from harness.bench_e2e import LOGITS_FACTOR
from harness.decode_plots import PER_DTYPE, copy_label
from harness.device_timing import COPY_BYTES
from harness.markdown import DASH, Footnotes, count_range, link, milliseconds, num, percent, table, us
from harness.plots import PerDtypeFigure
from harness.reference_text import REFERENCE_COLUMN, ratio_rule, reference_cell, with_footnotes
from harness.results import DecodeRow, E2ERow
from harness.study import FULL, DecodeShape, KvPlan
from harness.tables import GpuResults, Reference, backend_rank, decode_shape, kv_plan, study_pair

if TYPE_CHECKING:
    from harness.gpu_page import Page

DECODE_TITLE, KV_TITLE = "## Decode", "## KV-cache generation"
NOT_YET = "Not measured on this GPU yet"
DECODE_FIGURE, KV_FIGURE = PER_DTYPE  # decode_<dtype>.png, kv_cache_<dtype>.png


def _figure(page: Page, figure: PerDtypeFigure, dtype: str) -> str | None:
    path = page.plots_dir / page.r.slug / figure.name(dtype)
    return f"![{path.name}]({link(path, page.path)})" if path.exists() else None


def _listing(label: str, reasons: dict[tuple[str, str], str], dtype: str) -> str | None:
    found = {b: why for (b, d), why in sorted(reasons.items(), key=lambda item: backend_rank(item[0][0])) if d == dtype}
    return f"{label}: " + "; ".join(f"`{b}`: {why}" for b, why in found.items()) + "." if found else None


def _joined(parts: Sequence[str | None]) -> str:
    return "\n\n".join(p for p in parts if p)


# -- decode ------------------------------------------------------------------------------------
def _anchor(r: GpuResults, shape: DecodeShape, dtype: str, last: str | None) -> DecodeRow | None:
    """The row whose run the shape's reference comes from: the last version's, else any."""
    own = r.decode_row(last, shape, dtype) if last else None
    return own or next((x for x in r.decode if x.dtype == dtype and decode_shape(x) == shape), None)


def decode_grid_table(r: GpuResults, dtype: str) -> str:
    """Per shape of the full-length grid: PyTorch's fastest of the last version's run and its
    time, the last version's time, rate, fraction of the copy and ratio."""
    last = r.last_decode(dtype)
    notes = Footnotes()
    body = []
    for shape in (s for s in r.decode_shapes(dtype) if s.lengths == FULL):
        row = r.decode_row(last, shape, dtype) if last else None
        _, reference = r.decode_vs_fastest(_anchor(r, shape, dtype, last))
        ratio, _ = r.decode_vs_fastest(row)
        body.append([str(shape.B), f"{shape.S:,}", reference_cell(reference, notes),
                     us(reference.time if reference else None), us(row.us_device_median if row else None),
                     num(row.gbps if row else None, "{:,.0f}"), num(row.fraction_of_hbm if row else None, "{:.2f}"),
                     num(ratio, "{:.2f}")])
    name = f"`{last}`" if last else "the last decode version"
    header = ["B", "L", REFERENCE_COLUMN, "its µs", f"{name} µs", f"{name} GB/s", "of the copy",
              f"{name} / fastest PyTorch"]
    return with_footnotes(table(header, body), notes)


def ragged_table(r: GpuResults, dtype: str) -> str | None:
    """Every version at the ragged shapes: device time, rate and fraction of the copy."""
    shapes = [s for s in r.decode_shapes(dtype) if s.lengths != FULL]
    if not shapes:
        return None
    names = sorted({x.backend for x in r.decode if x.dtype == dtype and x.lengths != FULL}, key=backend_rank)
    body = []
    for name in names:
        cells = [f"`{name}`"]
        for shape in shapes:
            row = r.decode_row(name, shape, dtype)
            cells += [us(row.us_device_median if row else None), num(row.fraction_of_hbm if row else None, "{:.2f}")]
        body.append(cells)
    header = ["version", *(f"{s.label()}: {what}" for s in shapes for what in ("µs", "of the copy"))]
    lengths = "; ".join(f"{s.label()}: {s.B} sequences of {s.length_range()[0]:,} to {s.length_range()[1]:,} rows "
                        f"in caches of {s.S:,}" for s in shapes)
    return (f"Ragged batches ({lengths}), one call each: PyTorch's kernels take such a batch one sequence per call, "
            f"so only the decode versions are timed here.\n\n" + table(header, body))


def copy_rates(r: GpuResults, dtype: str) -> str:
    """'The copy's rate: HBM, 2 GiB copy: 3,021 GB/s (commit X).'"""
    runs = sorted({(x.hbm_gbps, x.provenance.commit) for x in r.decode if x.dtype == dtype and x.hbm_gbps})
    return "The copy's rate, measured in the run before its rows: " + "; ".join(
        f"{copy_label(gbps)} (commit `{commit}`)" for gbps, commit in runs) + "."


def _uncaptured(r: GpuResults, dtype: str) -> str | None:
    found = {x.backend: x.notes for x in r.decode if x.dtype == dtype and x.notes}
    return ("Notes: " + "; ".join(f"`{b}`: {why}" for b, why in found.items()) + ".") if found else None


def decode_dtype_part(page: Page, dtype: str) -> str:
    r = page.r
    return _joined([f"### Decode, {dtype}", decode_grid_table(r, dtype), ragged_table(r, dtype), copy_rates(r, dtype),
                    _listing(f"Not measured in {dtype}", r.decode_not_measured, dtype), _uncaptured(r, dtype),
                    _figure(page, DECODE_FIGURE, dtype)])


def _gate_cell(r: GpuResults, backend: str, dtype: str, cases: Sequence[str]) -> str:
    """'5/5', '**4 of 5 failed** (up to 1.5× the bound)', '3/3, no row of 2: ...'."""
    rows = [x for x in r.decode_correctness if x.backend == backend and x.dtype == dtype]
    if not rows:
        return DASH
    failed = [x for x in rows if not x.passed]
    missing = [c for c in cases if c not in {x.case for x in rows}]
    text = f"{len(rows) - len(failed)}/{len(rows)}"
    if failed:
        worst = max(x.rel_err / x.rel_tol for x in failed if x.rel_tol) if any(x.rel_tol for x in failed) else None
        text = f"**{len(failed)} of {len(rows)} failed**" + (f" (error up to {worst:.1f}× its bound)" if worst else "")
    if missing:
        text += f"; no row of {len(missing)} ({', '.join(repr(c) for c in missing)}: refused)"
    return text


def decode_gate_table(r: GpuResults) -> str | None:
    """The decode gate per backend and dtype: cases passed, failed, refused."""
    rows = r.decode_correctness
    if not rows:
        return None
    dtypes = r.decode_dtypes() or sorted({x.dtype for x in rows})
    names = sorted({x.backend for x in rows}, key=backend_rank)
    cases = {d: list(dict.fromkeys(x.case for x in rows if x.dtype == d)) for d in dtypes}
    body = [[f"`{name}`", *(_gate_cell(r, name, d, cases[d]) for d in dtypes)] for name in names]
    every = list(dict.fromkeys(c for names in cases.values() for c in names))
    return (f"The decode gate (`decode_correctness.csv`): each backend's decode op against float64 on {len(every)} "
            f"cases ({', '.join(repr(c) for c in every)}); cases passed of those run. A decode version that fails is "
            f"left out of the benchmark; PyTorch's kernels are timed whatever their error.\n\n"
            + table(["backend", *dtypes], body))


def decode_section(page: Page) -> str:
    r = page.r
    if not r.decode_dtypes():
        return f"{DECODE_TITLE}\n\n{NOT_YET}: `decode.csv` has no rows (`python -m harness bench-decode` writes them)."
    rows = r.decode
    intro = (f"One new query row per sequence against a cache of L rows (the decode op: B sequences, H="
             f"{'/'.join(str(h) for h in sorted({x.H for x in rows}))}, d={HEAD_DIM}, every sequence attending to all "
             f"L rows). Device time per call: the median of {count_range([x.replays for x in rows])} replays in each "
             f"of {count_range([x.rounds for x in rows])} rounds (the backends' order reversed every other round) of a "
             f"CUDA graph of R × [L2 flush, call] minus the flushes alone, divided by R. GB/s: the K and V bytes one "
             f"call must read over its device time; of the copy: that over the rate of a {COPY_BYTES / 2**30:g} GiB "
             f"device-to-device copy measured in the same run (read and written bytes over its time). "
             f"{ratio_rule('device time')}.")
    return _joined([DECODE_TITLE, intro, *(decode_dtype_part(page, d) for d in r.decode_dtypes()),
                    decode_gate_table(r)])


# -- generation with a KV cache ----------------------------------------------------------------
def kv_cell(row: E2ERow | None) -> str:
    """'58.5 ms · 8,750/s' (GPU time, new tokens/s), or eager, marked, where there is no GPU time."""
    if row is None:
        return DASH
    if row.seconds_gpu_median:
        return f"{milliseconds(row.seconds_gpu_median)} · {num(row.tokens_per_second, '{:,.0f}')}/s"
    if row.seconds_eager_median:
        rate = num(row.eager_tokens_per_second, "{:,.0f}")
        return f"*{milliseconds(row.seconds_eager_median)} eager · {rate}/s eager*"
    return DASH


def _ratio_cell(ratio: float | None, reference: Reference | None, notes: Footnotes) -> str:
    return DASH if ratio is None else f"{ratio:.2f}× {reference_cell(reference, notes)}"


def kv_table(r: GpuResults, dtype: str) -> str:
    """Rows: backends (the study's pair, then transformers' generate()); columns: plans."""
    plans = r.kv_plans(dtype)
    names = sorted({x.backend for x in r.kv if x.dtype == dtype}, key=backend_rank)
    notes = Footnotes()
    body = [[_kv_name(name, dtype, r), *(kv_cell(r.kv_row(name, plan, dtype)) for plan in plans)] for name in names]
    pair = study_pair()
    if pair and pair.name in names:
        body.append([f"`{pair.name}` / fastest PyTorch, same run",
                     *(_ratio_cell(*r.kv_vs_fastest(r.kv_row(pair.name, plan, dtype)), notes) for plan in plans)])
    return with_footnotes(table(["backend", *(plan.label() for plan in plans)], body), notes)


def _kv_name(name: str, dtype: str, r: GpuResults) -> str:
    pair = study_pair()
    return f"`{name}` ({r.study_parts(dtype)})" if pair and name == pair.name else f"`{name}`"


def _failed_checks(rows: Sequence[E2ERow]) -> list[str]:
    """'`sdpa-cudnn` B=8 P=512: the graph's tokens differ from the eager run's', per failing row."""
    found = []
    for x in rows:
        plan = kv_plan(x).label()
        if x.accuracy_check is False:
            found.append(f"`{x.backend}` {plan}: fails its accuracy check")
        if x.graph_tokens_match_eager is False:
            found.append(f"`{x.backend}` {plan}: the graph's tokens differ from the eager run's")
    return found


def kv_checks(r: GpuResults, dtype: str) -> str:
    """The accuracy and graph checks in one paragraph: the rows that fail, and the token agreement."""
    rows = [x for x in r.kv if x.dtype == dtype]
    failed = _failed_checks(rows)
    checks = ("Checks that fail: " + "; ".join(failed) + "." if failed else
              "Every row passes its accuracy check and its graph's tokens equal its eager run's.")
    return checks + _agreement(rows, dtype)


def _agreement(rows: Sequence[E2ERow], dtype: str) -> str:
    """' Tokens equal to bfloat16 `naive`'s ...: 44% to 81%' where they are not all equal."""
    shares = [x.token_agreement for x in rows if x.token_agreement is not None and x.backend != TOKENS_REFERENCE]
    if not shares or min(shares) == 1.0:
        return ""
    return (f" Tokens equal to {dtype} `{TOKENS_REFERENCE}`'s, position by position: {percent(min(shares))} to "
            f"{percent(max(shares))} (greedy tokens of different kernels may part after a near-tie: in half precision "
            f"the accuracy check is the teacher-forced logits error, within {LOGITS_FACTOR}× {dtype} "
            f"`{TOKENS_REFERENCE}`'s).")


def kv_dtype_part(page: Page, dtype: str) -> str:
    r = page.r
    return _joined([f"### KV-cache generation, {dtype}", kv_table(r, dtype), kv_checks(r, dtype),
                    _listing(f"Not measured in {dtype}", r.kv_not_measured, dtype), _figure(page, KV_FIGURE, dtype)])


def kv_section(page: Page) -> str:
    r = page.r
    rows = r.kv
    if not rows:
        return (f"{KV_TITLE}\n\n{NOT_YET}: `e2e.csv` has no kv-cache rows (`python -m harness bench-e2e --modes "
                f"kv-cache`).")
    new = sorted({x.tokens - x.prompt_tokens for x in rows})
    pair = study_pair()
    intro = (f"GPT-2 ({rows[0].model_description()}) generating {'/'.join(map(str, new))} new tokens per sequence, "
             f"greedy, for B sequences at once after prompts of P tokens, with a KV cache: the backend's prefill op "
             f"for the prompts, its decode op for each new token. Each cell: the GPU time of the whole generation "
             f"(prefill included; one CUDA graph, median of its replays) and the new tokens of all B sequences per "
             f"second. " + (f"`{pair.name}`: the study's own pair, the last prefill version of the dtype's track "
                            f"and the last decode version. " if pair else "") +
             f"`{hf_generate.NAME}`: Hugging Face's generate() with its own cache, which grows from Python, so it has "
             f"no GPU time: its cells are *eager* times (host included), not comparable with the GPU times beside "
             f"them. {ratio_rule('GPU time', 'plan')}.")
    return _joined([KV_TITLE, intro, *(kv_dtype_part(page, d) for d in r.kv_dtypes())])


def study_vs_fastest(r: GpuResults, plan: KvPlan, dtype: str) -> tuple[E2ERow | None, float | None, Reference | None]:
    """The study's row of `plan` in `dtype`, its ratio to PyTorch's fastest of its run, that reference."""
    pair = study_pair()
    row = r.kv_row(pair.name, plan, dtype) if pair else None
    return (row, *r.kv_vs_fastest(row))
