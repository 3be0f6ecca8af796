"""A matrix product rounds the same at one and two torch threads once the package is imported
(``textglauber.MKL_CBWR``), and would not without it: the reason a serial unit, torch on every
core, gives the same tables as a one-thread worker."""
import os
import subprocess
import sys

import pytest
import torch

import textglauber

PROBE = """
import sys, torch
g = torch.Generator().manual_seed(0)
gap = 0.0
for k, n in ((256, 512), (512, 768), (768, 768)):
    a, w = torch.randn(1, k, generator=g), torch.randn(k, n, generator=g)
    got = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        got.append(a @ w)
    gap = max(gap, (got[0] - got[1]).abs().max().item())
print(gap)
"""


def _gap(env: dict) -> float:
    """The largest difference between the probe's products at one and two torch threads, in a fresh
    process with ``env`` (MKL reads its mode at its first call, so each mode needs its own process)."""
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def test_importing_the_package_sets_the_strict_mode_for_every_process_it_starts():
    assert os.environ["MKL_CBWR"] == textglauber.MKL_CBWR == "AUTO,STRICT"


@pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="torch without MKL")
def test_products_are_the_same_at_one_and_two_threads_in_strict_mode_and_not_without_it():
    strict = _gap({**os.environ, "MKL_CBWR": textglauber.MKL_CBWR})
    default = _gap({k: v for k, v in os.environ.items() if k != "MKL_CBWR"})
    assert strict == 0.0
    if default == 0.0:
        pytest.skip("this CPU's MKL rounds these products the same at one and two threads anyway")
    assert default > 1e-6
