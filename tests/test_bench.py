"""The benchmark command runs end to end and its table says what the issue asks for (no timing
assertions: speed lives in the benchmark's own output, not in tests)."""
import pandas as pd

from textglauber import bench


def test_benchmark_writes_every_variant_and_logit_memory_scales_with_the_allowed_vocabulary(tmp_path, tiny_mlm):
    out = tmp_path / "bench-cpu.csv"
    assert bench.main(["--models", "tiny-mlm", "--lengths", "6", "--batches", "1", "4", "--steps", "1",
                       "--rounds", "1", "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert not (tmp_path / "bench-cpu.partial.csv").exists()
    four = df[df.batch == 4].set_index("variant")
    assert {"engine", "fill_mask_loop", "shared_site_full", "coupled_pairs"} <= set(four.index)
    V, L = tiny_mlm.model.config.vocab_size, 6 + 2
    A = four.loc["engine", "logit_bytes"] // (4 * 4)
    assert A < V                                                       # the allowed vocabulary, not all of it
    assert four.loc["shared_site_full", "logit_bytes"] == 4 * L * V * 4  # B x n x V float32
    speed = four.loc["engine", "chain_steps_per_s"] / four.loc["shared_site_full", "chain_steps_per_s"]
    assert four.loc["shared_site_full", "engine_speedup"] == speed
    assert (df.chain_steps_per_s > 0).all() and (df.compute_bound_steps_per_s > 0).all()
