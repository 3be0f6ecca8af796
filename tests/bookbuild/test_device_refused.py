"""A device this machine does not have is one line before any compute (issue 65, item 3), in the
build's pre-flight and in the benchmark, where it used to end in a traceback."""
import pytest
import torch

from textglauber import profile as P
from textglauber.bench import __main__ as bench_cli
from textglauber.bookbuild import preflight

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the case is a machine without CUDA")


def test_a_profile_asking_for_cuda_on_a_cpu_machine_is_named_in_the_preflight(pdir):
    text = (pdir / "smoke.yaml").read_text()
    assert "  device: auto" in text
    (pdir / "gpuonly.yaml").write_text(text.replace("  device: auto", "  device: cuda", 1).replace("profile: smoke", "profile: gpuonly", 1))
    lines = preflight.device_problems("gpuonly", {c: P.chapter_parameters("gpuonly", c) for c in ["traps", "basins"]})
    assert len(lines) == 2
    assert all("gpuonly.yaml: chapter '" in ln and "device = 'cuda': " in ln and "CUDA is not available" in ln
               for ln in lines)
    assert preflight.device_problems("smoke", {"traps": P.chapter_parameters("smoke", "traps")}) == []


def test_a_dtype_this_machine_cannot_give_is_named_by_its_own_key():
    """The schema refuses an unknown dtype first; a caller past it still gets the key at fault."""
    lines = preflight.device_problems("smoke", {"traps": {"device": "cpu", "dtype": "int3"}})
    assert len(lines) == 1 and "chapter 'traps': dtype = 'int3': unknown dtype 'int3'" in lines[0], lines


def test_the_benchmark_refuses_cuda_on_a_cpu_machine_in_one_line(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the grid ran")
    monkeypatch.setattr(bench_cli, "run_grid", refuse)
    with pytest.raises(SystemExit) as exc:
        bench_cli.main(["--device", "cuda", "--quick"])
    assert str(exc.value) == "--device cuda --dtype auto: device 'cuda' was asked for but CUDA is not available here"
