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


def test_a_tables_bytes_are_its_values(tmp_path):
    """A frame that carries ``attrs`` (a wall time, say) writes the bytes of the same frame without
    them: pandas would store them in the file's metadata, and two runs would differ in bytes."""
    import pandas as pd

    plain = pd.DataFrame({"x": [1.0, 2.0]})
    timed = plain.copy()
    timed.attrs["seconds"] = [0.123, 0.456]
    results.write_table(plain, tmp_path, "plain")
    results.write_table(timed, tmp_path, "timed")
    assert (tmp_path / "plain.parquet").read_bytes() == (tmp_path / "timed.parquet").read_bytes()
    assert timed.attrs == {"seconds": [0.123, 0.456]}            # the caller's frame is left as it was


def test_a_re_render_writes_nothing_and_names_what_would_change(tmp_path, monkeypatch):
    """With REPLAY_ENV set, a chapter's tables go to a staging folder and its manifest compares them
    with the folder's: the same tables leave the folder untouched; other ones raise ReplayMismatch."""
    import pandas as pd
    import pytest

    out, _ = results.start_chapter(tmp_path, "smoke", "traps", seed=7)
    results.write_manifest(out, parameters={"n": 1}, models=[], seed=7,
                           tables=results.write_tables(out, {"t": pd.DataFrame({"x": [1]})}))
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}
    monkeypatch.setenv(results.REPLAY_ENV, "1")
    written = results.write_tables(out, {"t": pd.DataFrame({"x": [1]})})        # no run opened: one is, here
    results.write_manifest(out, parameters={"n": 1}, models=[], seed=7, tables=written)
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()} == before
    results.write_tables(out, {"t": pd.DataFrame({"x": [2]})})
    with pytest.raises(results.ReplayMismatch, match="digests"):
        results.write_manifest(out, parameters={"n": 1}, models=[], seed=7, tables=["t"])
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()} == before
    assert not list(tmp_path.glob("smoke/.traps.run-*"))
