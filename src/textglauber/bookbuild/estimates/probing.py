"""The probe: this machine's speed now, relative to the calibration machine (see
:mod:`textglauber.bookbuild.estimates`), run at most once per plan."""
from __future__ import annotations

import time

from .calibration import REFERENCE_PROBE_ONE_S, REFERENCE_PROBE_S
from .costs import MINILM_SHAPE

PROBE_BATCH, PROBE_TOKENS = 32, 22
PROBE_PASSES = (2, 12)       # at least, at most, per thread setting
PROBE_BUDGET_S = 1.5         # per thread setting


def probe(budget_s: float = PROBE_BUDGET_S) -> tuple[float, float]:
    """(seconds per pass on one thread, seconds per pass on torch's threads), the median of each,
    for the fixed probe batch on this machine now (see the module docstring). The random model is
    built inside ``torch.random.fork_rng`` and the thread count is restored: the process is left
    as it was."""
    import statistics

    import torch
    from transformers import BertConfig, BertForMaskedLM

    layers, h, inter, _, _ = MINILM_SHAPE
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = BertForMaskedLM(BertConfig(vocab_size=30522, hidden_size=h, num_hidden_layers=layers,
                                           num_attention_heads=12, intermediate_size=inter)).eval()
        ids = torch.randint(1000, 30000, (PROBE_BATCH, PROBE_TOKENS))
    rows = torch.arange(PROBE_BATCH)
    threads = torch.get_num_threads()
    out = []
    try:
        for n in (1, threads):
            torch.set_num_threads(n)
            times = []
            with torch.inference_mode():
                model.cls(model.bert(input_ids=ids)[0][rows, 1])            # warm-up
                t0 = time.perf_counter()
                while len(times) < PROBE_PASSES[0] or (len(times) < PROBE_PASSES[1]
                                                       and time.perf_counter() - t0 < budget_s):
                    t = time.perf_counter()
                    model.cls(model.bert(input_ids=ids)[0][rows, 1])
                    times.append(time.perf_counter() - t)
            out.append(float(statistics.median(times)))
    finally:
        torch.set_num_threads(threads)
    return out[0], out[1]


class Probe:
    """The probe, run at most once and only when some line of the plan needs it. ``one`` and
    ``many``: seconds per pass on one thread and on torch's threads."""

    def __init__(self, measure=probe):
        self._measure, self.one, self.many, self.error = measure, None, None, None

    def __call__(self) -> float | None:
        """The probe's reading on torch's threads (None if it failed)."""
        if self.many is None and self.error is None:
            try:
                got = self._measure()
                self.one, self.many = (float(got), float(got)) if isinstance(got, (int, float)) else map(float, got)
            except Exception as exc:            # the plan only prints: never stop a build for it
                self.error = f"{type(exc).__name__}: {exc}"
        return self.many

    @property
    def seconds(self) -> float | None:
        return self.many

    def scale(self, overhead_s: float, compute_s: float) -> float:
        """Seconds here for work that takes ``overhead_s`` (one thread: kernel, imports, Python) plus
        ``compute_s`` (torch's threads) on the calibration machine."""
        self()
        return overhead_s * self.one / REFERENCE_PROBE_ONE_S + compute_s * self.many / REFERENCE_PROBE_S

    def basis(self) -> str:
        return f"estimated from a {self.many:.2f} s probe"
