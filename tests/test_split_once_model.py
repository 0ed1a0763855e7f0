"""experiments/tools/split_once_model.py, the arithmetic issue 19's first step rests on: it
reproduces version 18's notes (cycles per tile, the bound at B=8, T=4096) and counts the
causal tiles and loads of each row-block size."""
import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def model():
    return load_script("experiments/tools/split_once_model.py")


def test_tile_counts(model):
    """64 row blocks of 64 at T=4096 load 1 + 2 + ... + 64 tiles; 32 of 128 load 2 + 4 + ... + 64;
    a partial last tile counts as a tile."""
    assert model.causal_tile_products(4096) == model.tile_loads(4096, 64) == 64 * 65 // 2
    assert model.tile_loads(4096, 128) == 2 * (32 * 33 // 2)
    assert model.causal_tile_products(65) == 3 and model.tile_loads(65, 128) == 2


def test_version_18_is_its_notes(model):
    """Version 18's notes: 1,510 tensor and 1,790 shared-memory cycles per tile, shared memory
    the bound, 1.55 ms at B=8, T=4096 (and 6.5 GB read from L2, the figure issue 19 cites)."""
    v18 = model.bounds(model.DESIGNS[0], 8, 12, 4096, l2_tbps=6.5)
    assert v18.tensor_cycles == pytest.approx(1510, abs=5)
    assert v18.smem_cycles == pytest.approx(1790, abs=5)
    assert v18.bound_us == pytest.approx(1550, rel=0.01) and v18.bound_us == v18.smem_us
    assert v18.l2_gb == pytest.approx(6.5, rel=0.01)


def test_splitting_once_at_64_rows_doubles_the_l2_reads_and_a_producer_leaves_the_tensor_core_the_bound(model):
    v18, once64, once128, producer = (model.bounds(d, 8, 12, 4096, l2_tbps=6.5) for d in model.DESIGNS)
    assert once64.l2_gb == pytest.approx(2 * v18.l2_gb)
    assert once64.bound_us > v18.bound_us  # L2-bound, and the pre-pass on top
    assert once128.pre_pass_us > 0 and producer.pre_pass_us == 0
    assert producer.l2_gb == pytest.approx(v18.l2_gb / 2, rel=0.02)
    assert producer.bound_us == producer.tensor_us < once128.bound_us < v18.bound_us
