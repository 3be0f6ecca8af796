"""The chapters' shared first step."""
import torch

from textglauber import results


def test_start_chapter_empties_the_folder_and_seeds_one_generator(tmp_path):
    stale = tmp_path / "smoke" / "traps" / "old_table.parquet"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an earlier run")
    (stale.parent / "chains").mkdir()                      # what a chapter resumes from is kept
    out, gen = results.start_chapter(tmp_path, "smoke", "traps", seed=7)
    assert out == tmp_path / "smoke" / "traps" and not stale.exists() and (out / "chains").is_dir()
    expected = torch.Generator().manual_seed(7)
    assert torch.equal(torch.rand(5, generator=gen), torch.rand(5, generator=expected))
    _, other = results.start_chapter(tmp_path, "smoke", "traps", seed=8)
    assert not torch.equal(torch.rand(5, generator=other), torch.rand(5, generator=torch.Generator().manual_seed(7)))
