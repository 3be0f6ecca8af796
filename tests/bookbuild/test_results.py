"""The chapters' shared first step."""
import torch

from textglauber import results


def test_start_chapter_opens_a_run_on_the_folder_and_seeds_one_generator(tmp_path):
    """The folder keeps what an earlier run wrote until this run's manifest commits it; then it
    holds exactly what this run wrote, and the chains a chapter resumes from."""
    stale = tmp_path / "smoke" / "traps" / "old_table.parquet"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an earlier run")
    (stale.parent / "chains").mkdir()                      # what a chapter resumes from is kept
    out, gen = results.start_chapter(tmp_path, "smoke", "traps", seed=7)
    assert out == tmp_path / "smoke" / "traps" and stale.exists() and (out / "chains").is_dir()
    results.write_manifest(out, parameters={}, models=[], seed=7, tables=[])
    assert not stale.exists() and (out / "chains").is_dir() and (out / "manifest.json").is_file()
    expected = torch.Generator().manual_seed(7)
    assert torch.equal(torch.rand(5, generator=gen), torch.rand(5, generator=expected))
    _, other = results.start_chapter(tmp_path, "smoke", "traps", seed=8)
    assert not torch.equal(torch.rand(5, generator=other), torch.rand(5, generator=torch.Generator().manual_seed(7)))


def test_write_tables_writes_each_table_given_and_names_them_in_order(tmp_path):
    import pandas as pd

    a, b = pd.DataFrame({"x": [1, 2]}), pd.DataFrame({"y": ["u"]})
    assert results.write_tables(tmp_path, {"b": b, "skipped": None, "a": a}) == ["b", "a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet", "b.parquet"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "a.parquet"), a)
