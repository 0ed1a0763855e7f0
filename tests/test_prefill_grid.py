"""The prefill grid (issue 43, item 1), on the CPU: its shapes, which backends the kernel benchmark
measures there (the last version of each prefill track, found in the registry, and PyTorch's
kernels), a resumed benchmark measuring only what is missing, its heatmap, and the worst and
geometric-mean ratios on the GPU pages and the README, from the fixtures (GPU A has the grid,
with one shape unmeasured and one slower than cuDNN; GPU B has not measured it) and from the
committed results (which have no grid rows yet)."""
from __future__ import annotations

import csv
import dataclasses
import math
import os
from pathlib import Path
from typing import Iterable

import pytest
import torch
from matplotlib.patches import Rectangle

from backends import precision, registry
from backends.environment import Provenance
from backends.flex import RECOMPILE_LIMIT
from backends.registry import PROJECT_ROOT
from gpt2.config import SIZES
from harness import bench_kernels
from harness import cli as harness_cli
from harness.device_timing import CallTiming, Peak, Repetitions
from harness.gpu_page import Page
from harness.grid import NOT_MEASURED, GridCell, GridSummary, grid_dtypes, grid_summaries, grid_summary
from harness.grid_page import grid_line, grid_section
from harness.grid_plots import grid_figure
from harness.kernel_plan import FULL, GRID_ONLY, QUICK, KernelPlan, on_grid
from harness.plots import skipped
from harness.report import Context, results_block
from harness.results import KERNELS, OK, done
from harness.study import GPT2_HEADS, GRID_SHAPES, GRID_SMALL_SHAPES, GRID_WIDE_SHAPES, KERNEL_SHAPES, Shape
from harness.tables import GpuResults, baselines, load, tracks
from tests.scripts import load_script
from tests.test_plots_report import GPU_A, GPU_B, RESULTS, _outside, page, subset

BFLOAT16, FLOAT32 = precision.BFLOAT16, precision.FLOAT32
FIXTURES = load_script("tests/fixtures/make_fixtures.py")
COMMITTED = PROJECT_ROOT / "results"


def last_of_each_track() -> list[str]:
    """Found here from the tracks as the tables group them, not from registry.last_versions."""
    return [t.versions[-1] for t in tracks()]


# -- the grid's shapes -------------------------------------------------------------------------
def test_the_grid_is_gpt2_smalls_batches_and_lengths_and_the_wider_heads_at_four_points():
    assert len(GRID_SMALL_SHAPES) == 7 * 5 and len(GRID_WIDE_SHAPES) == 3 * 2 * 2
    assert len(set(GRID_SHAPES)) == len(GRID_SHAPES) == 47
    assert {(s.B, s.T) for s in GRID_SMALL_SHAPES} == {(B, T) for B in (1, 2, 4, 8, 16, 32, 64)
                                                       for T in (64, 128, 256, 512, 1024)}
    assert {s.H for s in GRID_SMALL_SHAPES} == {GPT2_HEADS} == {SIZES["small"].n_head}
    assert {(s.B, s.H, s.T) for s in GRID_WIDE_SHAPES} == {(B, H, T) for H in (16, 20, 25) for B in (1, 16)
                                                           for T in (256, 1024)}
    # issue 43's tables, up to GPT-2's context (T=2048 at B=1 and 8 is among the study's shapes)
    for B in (1, 4, 16, 32, 64):
        for T in (128, 256, 512, 1024):
            assert Shape(B, 12, T) in GRID_SHAPES, (B, T)


def test_the_study_shapes_stay_as_they_were():
    assert KERNEL_SHAPES == tuple(sorted({*(Shape(1, 12, T) for T in (64, 128, 256, 512, 1024, 2048, 4096)),
                                          *(Shape(8, 12, T) for T in (1024, 2048, 4096))}))
    assert len(set(GRID_SHAPES) & set(KERNEL_SHAPES)) == 6  # B=1 T 64-1024 and B=8 T=1024


# -- which backends get which shapes -----------------------------------------------------------
def test_the_grid_is_measured_for_pytorchs_kernels_and_the_last_version_of_each_track():
    prefill = registry.providing(registry.BACKENDS, registry.PREFILL)
    last = last_of_each_track()
    assert [v.name for v in registry.last_versions()] == last and len(last) == 2
    every = set(KERNEL_SHAPES) | set(GRID_SHAPES)
    for backend in prefill:
        expected = every if backend.name in last or not backend.is_version else set(KERNEL_SHAPES)
        assert set(FULL.shapes_for(backend)) == expected, backend.name
        assert on_grid(backend) == (expected == every)
        assert QUICK.shapes_for(backend) == QUICK.every  # no grid in a quick sweep
        assert bool(GRID_ONLY.shapes_for(backend)) == on_grid(backend)
    assert not on_grid(registry.get("study"))  # a composite: its parts are measured alone
    grid_rows = sum(len(FULL.shapes_for(b)) - len(KERNEL_SHAPES) for b in prefill)
    assert grid_rows == (len(baselines()) + len(last)) * 41  # the grid's 41 own shapes, not times every version
    assert FULL.shapes()[:len(KERNEL_SHAPES)] == KERNEL_SHAPES  # the study's shapes first


def test_a_new_version_takes_the_grid_from_its_track_without_an_edit(monkeypatch):
    last = registry.get(last_of_each_track()[-1])
    newer = dataclasses.replace(last, name="h99", number=99, folder="h99_newer", parent=last.name)
    monkeypatch.setattr(registry, "BACKENDS", (*registry.BACKENDS, newer))
    assert [v.name for v in registry.last_versions()] == [last_of_each_track()[0], "h99"]
    assert on_grid(newer) and not on_grid(last)
    assert FULL.shapes_for(last) == KERNEL_SHAPES


def test_flex_attentions_compilations_in_the_kernel_benchmark_fit_dynamos_limits():
    """One process compiles flex-attention once per shape and dtype (static), beside the gate's
    dynamic compilations: past RECOMPILE_LIMIT it fails loudly, past Dynamo's cap on a process's
    compilations it gives up too."""
    flex = next(b for b in registry.BACKENDS if b.compiles)
    static = len(FULL.shapes_for(flex)) * len(precision.EVERY)
    gate = 4 * len(precision.EVERY)  # the dynamic compilations, generously
    assert static + gate <= RECOMPILE_LIMIT < torch._dynamo.config.accumulated_recompile_limit


# -- the benchmark: which rows, and a resumed run --------------------------------------------------
class FakeTimer:
    """Calls once, and says it took 5-6 us."""

    def time(self, fn, plan=None) -> CallTiming:
        fn()
        return CallTiming(Repetitions(1, 2), (5.0, 6.0), (9.0, 9.5), None)


SMALL, WIDER = Shape(1, 12, 16), Shape(2, 12, 16)
PLAN = KernelPlan(every=(SMALL,), grid=(SMALL, WIDER))
PROVENANCE = Provenance(gpu="CPU test", driver="-", cuda="-", torch=torch.__version__, commit="test",
                        date="2026-01-01T00:00:00Z")


def _bench(names: list[str], path: Path, resume: bool = True) -> None:
    backends = registry.providing([registry.get(n) for n in names], registry.PREFILL)
    previous = done(KERNELS, path, PROVENANCE) if resume else {}
    bench_kernels._run_dtype(backends, FLOAT32, PLAN, FakeTimer(), path, previous, {}, PROVENANCE,
                             torch.device("cpu"), rounds=2)


def _keys(path: Path) -> list[tuple[str, int, str]]:
    return [(x.backend, x.B, x.status == OK) for x in KERNELS.read(path).rows]


@pytest.fixture
def quiet(monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(bench_kernels, "measure_peak", lambda device, dtype: Peak("float32 FMA", 50.0))


def test_the_benchmark_measures_the_grid_for_its_backends_and_a_rerun_only_what_is_missing(tmp_path, quiet):
    path = tmp_path / "kernels.csv"
    v29, h23 = last_of_each_track()
    names = ["naive", "sdpa-math", "v01", v29, h23]
    _bench(names, path)
    rows = _keys(path)
    reference = registry.kernel_reference(FLOAT32)  # added for the ratios; needs CUDA, so a status row here
    assert sorted(b for b, B, _ in rows if B == 1) == sorted([reference, *names])
    assert sorted(b for b, B, _ in rows if B == 2) == sorted([reference, "naive", "sdpa-math", v29, h23])
    assert {b for b, _, ok in rows if ok} == {"naive", "sdpa-math"}  # the others: CUDA only, or not float32
    _bench(names, path)
    assert _keys(path) == rows, "a rerun of the same setup measures nothing again"
    with path.open(newline="") as f:  # stopped before the last shape was written
        kept = [line for line in csv.reader(f) if line[2] != "2"]
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(kept)
    _bench(names, path)
    assert sorted(_keys(path)) == sorted(rows)


def test_an_earlier_version_alone_does_not_time_the_reference_at_the_grid(tmp_path, quiet):
    path = tmp_path / "kernels.csv"
    _bench(["v01"], path)
    assert {B for _, B, _ in _keys(path)} == {1}


def test_bench_kernels_refuses_what_measures_no_grid_before_looking_for_a_gpu(capsys):
    assert harness_cli.main(["bench-kernels", "--quick", "--grid-only"]) == 2
    assert "--quick and --grid-only exclude each other" in capsys.readouterr().err
    assert harness_cli.main(["bench-kernels", "--grid-only", "--backends", "v01"]) == 2
    assert "none of the selected backends is measured" in capsys.readouterr().err


# -- the summary ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpus(fixture_results) -> list[GpuResults]:
    """The fixtures' GPUs, as read once for the session (tests/conftest.py)."""
    assert [r.slug for r in fixture_results] == [GPU_A, GPU_B]
    return fixture_results


def independent_ratios(r: GpuResults, version: str, dtype: str) -> dict[Shape, float]:
    """The version's device time over the fastest baseline row at each grid shape (the fixtures
    are one run, so every row there is of the same run)."""
    found = {}
    for shape in GRID_SHAPES:
        row = r.kernel(version, shape, dtype)
        times = [x.us_device_median for x in r.kernel_rows(shape, dtype) if x.backend in baselines()
                 and x.us_device_median]
        if row and row.us_device_median and times:
            found[shape] = row.us_device_median / min(times)
    return found


def test_the_worst_and_the_geometric_mean_come_from_the_same_run_ratios(gpus):
    r = gpus[0]
    half, bf16, unmeasured = FIXTURES.HALF_LAST, BFLOAT16, FIXTURES.GRID_UNMEASURED[2]
    s = grid_summary(r, next(t for t in tracks() if t.half_precision), bf16)
    expected = independent_ratios(r, half, bf16)
    assert s.version == half and len(expected) == len(GRID_SHAPES) - 1
    assert {c.shape: c.ratio for c in s.measured} == pytest.approx(expected)
    assert [c.shape for c in s.blank] == [unmeasured] and s.cell(unmeasured).row is None
    worst = s.worst()
    assert worst.shape == FIXTURES.GRID_SLOWER[2] and worst.ratio == pytest.approx(FIXTURES.GRID_SLOWER[3])
    assert worst.reference.backend == registry.kernel_reference(bf16)
    assert s.geomean() == pytest.approx(geometric_mean(expected.values()))
    # float32: flex-attention, faster than sdpa-efficient at B=8 in the fixtures, is the reference there
    f32 = grid_summary(r, next(t for t in tracks() if not t.half_precision), FLOAT32)
    assert {c.reference.backend for c in f32.measured if c.shape.B == 8} == {FIXTURES.FASTER_THAN_THE_REFERENCE[0]}
    assert f32.geomean() == pytest.approx(geometric_mean(independent_ratios(r, f32.version, FLOAT32).values()))


def geometric_mean(values: Iterable[float]) -> float:
    logs = [math.log(x) for x in values]
    return math.exp(sum(logs) / len(logs))


def test_a_faster_reference_row_of_another_run_changes_no_ratio(tmp_path):
    """The grid divides by the fastest PyTorch kernel of the version's own run: a later, faster
    cuDNN row of another commit (the latest row the tables show) is not it."""
    results = subset(tmp_path / "results", lambda *_: True)
    path = KERNELS.path(results, GPU_A)
    _, dtype, shape, ratio = FIXTURES.GRID_SLOWER
    cudnn = next(x for x in KERNELS.read(path).rows if (x.backend, x.dtype, x.shape) == ("sdpa-cudnn", dtype, shape))
    KERNELS.append(path, dataclasses.replace(cudnn, us_device_median=0.5, provenance=dataclasses.replace(
        cudnn.provenance, commit="another-run", date="2026-02-01T00:00:00Z")))
    r = load(GPU_A, results)
    assert r.kernel("sdpa-cudnn", shape, dtype).us_device_median == 0.5
    s = next(x for x in grid_summaries(r) if x.dtype == dtype)
    assert s.worst().shape == shape and s.worst().ratio == pytest.approx(ratio)


def test_a_summary_without_ratios_has_no_worst_and_blank_cells_are_left_out():
    track = tracks()[0]
    cells = (GridCell(SMALL, None, 0.5, None), GridCell(WIDER, None, 2.0, None), GridCell(Shape(4, 12, 16), None,
                                                                                       None, None))
    s = GridSummary(track, FLOAT32, "v99", cells)
    assert s.worst().shape == WIDER and s.geomean() == pytest.approx(1.0) and len(s.blank) == 1
    empty = GridSummary(track, FLOAT32, None, cells[2:])
    assert empty.worst() is None and empty.geomean() is None


def test_an_earlier_versions_grid_rows_leave_the_tables_once_the_last_version_has_them(tmp_path):
    """The grid row of a version that was its track's last (an older commit's) is not shown,
    nor counted in the provenance, where the track's last version has a row at that shape; it
    is where the last has none (a GPU whose sweeps predate it)."""
    half, (_, dtype, shape, _) = FIXTURES.HALF_LAST, FIXTURES.GRID_SLOWER
    earlier = registry.track_of(registry.get(half))[-2].name
    assert shape not in KERNEL_SHAPES and not FULL.measures(registry.get(earlier), shape)

    last = next(x for x in KERNELS.read(KERNELS.path(RESULTS, GPU_A)).rows
                if (x.backend, x.dtype, x.shape) == (half, dtype, shape))

    def with_earlier_row(results: Path) -> Path:
        KERNELS.append(KERNELS.path(results, GPU_A), dataclasses.replace(
            last, backend=earlier, provenance=dataclasses.replace(last.provenance, commit="earlier-sweep",
                                                                  date="2026-01-02T00:00:00Z")))
        return results

    shown = load(GPU_A, with_earlier_row(subset(tmp_path / "a", lambda *_: True)))
    assert (earlier, dtype, shape) not in {(x.backend, x.dtype, x.shape) for x in shown.kernels}
    assert "earlier-sweep" not in [commit for commit, _, _ in shown.commits()]
    lagging = load(GPU_A, with_earlier_row(subset(tmp_path / "b", lambda name, row: not (
        name == "kernels.csv" and row["backend"] == half and (int(row["B"]), int(row["T"])) == (shape.B, shape.T)))))
    assert (earlier, dtype, shape) in {(x.backend, x.dtype, x.shape) for x in lagging.kernels}


def test_the_grid_version_is_the_last_with_rows_at_the_grids_own_shapes(tmp_path):
    """A GPU whose grid rows are of an earlier version shows that version; without any, nothing."""
    half = FIXTURES.HALF_LAST
    without = load(GPU_A, subset(tmp_path / "a", lambda name, row: name != "kernels.csv" or row["backend"] != half))
    assert next(s for s in grid_summaries(without) if s.dtype == BFLOAT16).version is None
    assert BFLOAT16 not in grid_dtypes(without) and FLOAT32 in grid_dtypes(without)


# -- the heatmap ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def heatmap(gpus):
    fig = grid_figure(gpus[0], BFLOAT16)
    fig.draw_without_rendering()
    return fig


def test_the_heatmap_writes_each_ratio_in_its_cell_and_leaves_the_unmeasured_one_blank(heatmap, gpus):
    assert not _outside(heatmap)
    small = next(ax for ax in heatmap.axes if ax.get_title(loc="left").endswith(f"GPT-2 small, H={GPT2_HEADS}"))
    numbers = {(round(t.get_position()[0]), round(t.get_position()[1])): t for t in small.texts}
    s = next(x for x in grid_summaries(gpus[0]) if x.dtype == BFLOAT16)
    batches = sorted({x.B for x in GRID_SMALL_SHAPES})
    lengths = sorted({x.T for x in GRID_SMALL_SHAPES})
    for cell in s.small():
        at = (lengths.index(cell.shape.T), batches.index(cell.shape.B))
        if cell.ratio is None:
            assert at not in numbers
            assert any(isinstance(p, Rectangle) and p.get_hatch() and p.get_xy() == (at[0] - 0.5, at[1] - 0.5)
                       for p in small.patches)
        else:
            assert numbers[at].get_text() == f"{cell.ratio:.2f}"
    worst = s.worst()
    slower = numbers[lengths.index(worst.shape.T), batches.index(worst.shape.B)]
    assert slower.get_fontweight() == "bold"
    colours = {p.get_xy(): p.get_facecolor() for p in small.patches if not p.get_hatch()}
    red, _, blue, _ = colours[(lengths.index(worst.shape.T) - 0.5, batches.index(worst.shape.B) - 0.5)]
    assert red > blue  # above 1: the red half of the diverging map
    red, _, blue, _ = colours[(-0.5, -0.5)]
    assert blue > red  # the fixtures' 0.92: blue
    footer = " ".join(t.get_text() for t in heatmap.texts)
    assert "Hatched, no number" in footer and "B=64 T=1024" in footer
    assert "sdpa-cudnn (46 cells)" in footer and "worst 1.30× at B=16 T=128" in footer
    wide = next(ax for ax in heatmap.axes if ax.get_title(loc="left") == "wider heads")
    assert len(wide.texts) == len(GRID_WIDE_SHAPES)


def test_a_gpu_without_the_grid_gets_no_heatmap_and_says_so(gpus):
    r = gpus[1]
    assert grid_dtypes(r) == [] and all(grid_figure(r, d) is None for d in precision.EVERY)
    assert f"{r.gpu}: no prefill_grid_<dtype>.png: not measured on this GPU yet" in "\n".join(skipped(r))


# -- the pages -----------------------------------------------------------------------------------
def test_the_gpu_pages_and_the_readme_give_the_worst_and_the_geometric_mean(gpus):
    a, b = gpus
    s = next(x for x in grid_summaries(a) if x.dtype == BFLOAT16)
    section = page(a).split("## Prefill grid\n")[1].split("\n## ")[0]
    assert (f"| {s.track.span()} | {BFLOAT16} | `{s.version}` | 46 of 47 | 1.30× | B=16 T=128 | `sdpa-cudnn` | "
            f"{s.geomean():.2f}× |") in section
    assert "No ratio (" in section and "B=64 T=1024" in section
    assert "## Prefill grid\n\nNot measured on this GPU yet" in page(b)
    readme = results_block(Context(gpus, PROJECT_ROOT / "README.md", Path("plots"), RESULTS))
    line_a = next(line for line in readme.splitlines() if line.startswith(f"- [{a.gpu}]") and "prefill-grid" in line)
    assert f"`{s.version}` {BFLOAT16}: worst 1.30× (B=16 T=128), geometric mean {s.geomean():.2f}× over 46 of 47" \
        in line_a
    assert f"- [{b.gpu}]({os.path.relpath(RESULTS / GPU_B / 'README.md', PROJECT_ROOT)}#prefill-grid): " \
           f"{NOT_MEASURED}." in readme


def test_the_committed_results_say_how_much_of_the_grid_each_gpu_has(committed_results):
    """plot and report run on the committed results (tests/test_cli.py runs report on them). A
    GPU whose grid is complete gets every track's line without a count, one part-way through
    says over how many shapes, one without the grid says it is not measured; the line and the
    section agree."""
    assert committed_results
    for r in committed_results:
        summaries = [s for s in grid_summaries(r) if s.version is not None]
        line = grid_line(r)
        text = grid_section(Page(r, COMMITTED / r.slug / "README.md", PROJECT_ROOT / "plots", COMMITTED))
        if not summaries:
            assert line == NOT_MEASURED, r.gpu
            assert "no prefill_grid_<dtype>.png: not measured on this GPU yet" in "\n".join(skipped(r))
            assert text.startswith("## Prefill grid\n\nNot measured on this GPU yet")
            continue
        for s in summaries:
            part = f"`{s.version}` {s.dtype}: worst"
            assert part in line, (r.gpu, part, line)
            count = f" over {len(s.measured)} of {len(s.cells)} shapes"
            assert (count in line) == bool(s.blank), (r.gpu, s.dtype, line)
        assert "Not measured on this GPU yet" not in text


def test_the_figures_against_t_draw_the_study_shapes_only(gpus):
    """The grid's rows (GPU A) leave kernel_time_vs_T's and precision_cost's columns (batches) and
    lines as they were: one point per length of each batch, H=12."""
    r = gpus[0]
    assert {x.B for x in r.kernels} == set(x.B for x in GRID_SHAPES) | {1, 8}
    assert sorted({x.B for x in r.study_kernels}) == [1, 8]
    series = r.kernel_series(FIXTURES.HALF_LAST, BFLOAT16, 1)
    assert [x.T for x in series] == sorted(s.T for s in KERNEL_SHAPES if s.B == 1)


def test_a_variant_can_be_tried_on_the_grid():
    """`python -m harness try ... --shapes grid` times a trial at the grid's shapes, the ones
    the kernel benchmark measures for each track's last version."""
    from harness.cli import TRY_SHAPES, build_parser

    args = build_parser().parse_args(["try", "h23t=h23+x.patch", "--shapes", "grid", "--dtype", "bfloat16"])
    assert TRY_SHAPES[args.shapes][0] == GRID_SHAPES
    assert TRY_SHAPES["all"][0] == KERNEL_SHAPES
