"""A tiny model is keyed by the content of its built files as well as its name (issue 65, item 3):
weights changed in place in the cache used to leave the key as it was ("skipped: inputs unchanged")."""
from textglauber.bookbuild import stamps
from textglauber.models import tiny


def test_weights_changed_in_the_cache_change_the_models_identity(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTGLAUBER_CACHE", str(tmp_path))
    name = "tiny-mlm:seed=1,layers=1"
    before = stamps.model_identity(name)
    folder = tiny.build(name)
    assert str(folder).startswith(str(tmp_path))
    assert stamps.model_identity(name) == before                      # built once: the same files, the same key
    weights = next(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1                                                     # one bit of the last weight
    weights.write_bytes(bytes(data))
    after = stamps.model_identity(name)
    assert after["built from code"] == name and after != before


def test_a_damaged_tiny_cache_file_is_told_to_rebuild_not_to_download(tmp_path, monkeypatch):
    from textglauber.models import headers

    monkeypatch.setenv("TEXTGLAUBER_CACHE", str(tmp_path))
    folder = tmp_path / "tiny" / "mlm-0123456789abcdef"
    folder.mkdir(parents=True)
    (folder / "pytorch_model.bin").write_bytes(b"PK\x03\x04 cut short")
    line = headers._bin_problem(folder / "pytorch_model.bin")
    assert line.endswith(f"Fix: delete {folder} (a tiny model, built from code): the next run builds it again")
    other = tmp_path / "elsewhere" / "pytorch_model.bin"
    other.parent.mkdir()
    other.write_bytes(b"PK\x03\x04 cut short")
    assert headers._bin_problem(other).endswith(headers.REFETCH)
