"""The registry is the one list of backends: it must match the version folders."""
from harness import registry
from harness.registry import VERSIONS_DIR


def test_every_version_folder_has_a_row_and_every_row_a_folder():
    folders = sorted(p.name for p in VERSIONS_DIR.iterdir() if p.is_dir() and p.name.startswith("v"))
    rows = sorted(v.folder for v in registry.versions())
    assert folders == rows


def test_each_version_folder_holds_a_kernel_and_notes():
    for version in registry.versions():
        assert (version.source_dir / "attention.cu").is_file(), version.name
        assert (version.source_dir / "README.md").is_file(), version.name


def test_names_and_namespaces_are_unique():
    names = registry.names()
    assert len(names) == len(set(names))
    spaces = [v.namespace for v in registry.versions()]
    assert len(spaces) == len(set(spaces))


def test_versions_are_numbered_in_order_and_keep_fast_math():
    numbers = [v.number for v in registry.versions()]
    assert numbers == list(range(1, len(numbers) + 1))
    for v in registry.versions():
        assert ("--use_fast_math" in v.build_flags) == (v.number >= 4), v.name


def test_kernel_files_are_free_of_torch_headers():
    for v in registry.versions():
        text = (v.source_dir / "attention.cu").read_text()
        assert "torch/" not in text and "ATen/" not in text, v.name


def test_select():
    assert [b.name for b in registry.select("naive, v11")] == ["naive", "v11"]
    assert len(registry.select("all")) == len(registry.BACKENDS)
