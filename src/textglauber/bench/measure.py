"""How the benchmark measures: peak memory (/proc and glibc), the host's stolen CPU time,
interleaved timing rounds and ratios paired round by round. Shared by both grids."""
from __future__ import annotations

import ctypes
import gc
import time
from pathlib import Path

import numpy as np
import torch

SEED = 0                    # the generator that draws every cell's states and sites

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3          # glibc mallopt parameters
MEASURE_MMAP_THRESHOLD = 1 << 17          # 128 KiB while a peak is read: large blocks go straight to the system
TIMING_MMAP_THRESHOLD = 32 << 20          # glibc's adaptive ceiling on 64-bit, for the timed calls


def sync(device) -> None:
    """Wait for a CUDA device's queued work (nothing to wait for elsewhere)."""
    if device.type == "cuda":
        torch.cuda.synchronize()


class PeakMemory:
    """Peak memory one call adds above what the process held before it.

    CPU: the kernel's high-water mark of resident memory (VmHWM), reset before the call through
    /proc/self/clear_refs, minus the resident size before it. For the reading, glibc is told to
    hand large blocks to the system at once (a fixed 128 KiB mmap threshold) and freed heap is
    trimmed, so memory a previous variant freed is not counted as free room for this one. After
    it, the threshold goes to 32 MiB, glibc's own ceiling for its adaptive threshold: a fixed
    128 KiB threshold would make every activation a fresh, page-faulted mapping and slow the
    timed calls (by 40% for rxnfp BERT at batch 256), which an ordinary run never pays. CUDA:
    the allocator's peak above its allocation before the call. NaN where neither is available."""

    def __init__(self, device: torch.device):
        self.device = device
        self._libc = None
        if device.type == "cpu":
            try:
                self._libc = ctypes.CDLL("libc.so.6")
                Path("/proc/self/clear_refs").write_text("5")
            except (OSError, AttributeError):
                self._libc = None

    @staticmethod
    def _status(key: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        raise KeyError(key)

    def measure(self, fn) -> float:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            fn()
            return float(torch.cuda.max_memory_allocated() - base)
        if self._libc is None:
            fn()
            return float("nan")
        self._libc.mallopt(M_MMAP_THRESHOLD, MEASURE_MMAP_THRESHOLD)
        try:
            self._libc.malloc_trim(0)
            Path("/proc/self/clear_refs").write_text("5")
            base = self._status("VmRSS")
            fn()
            return float(max(self._status("VmHWM") - base, 0))
        finally:                   # as glibc's adaptive rule would leave them: trim at twice the mmap threshold
            self._libc.mallopt(M_MMAP_THRESHOLD, TIMING_MMAP_THRESHOLD)
            self._libc.mallopt(M_TRIM_THRESHOLD, 2 * TIMING_MMAP_THRESHOLD)


def cpu_times(stat_text: str | None = None) -> np.ndarray | None:
    """The host's CPU time counters (user, nice, system, idle, iowait, irq, softirq, steal),
    summed over all CPUs, from ``/proc/stat`` (or from ``stat_text``); None where there is none."""
    try:
        text = Path("/proc/stat").read_text() if stat_text is None else stat_text
    except OSError:
        return None
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "cpu" and len(f) >= 9:
            return np.asarray([int(v) for v in f[1:9]], dtype=float)
    return None


def steal_fraction(before: np.ndarray | None, after: np.ndarray | None) -> float:
    """Share of the CPU time between two :func:`cpu_times` readings that the hypervisor gave to
    other guests (steal). On a shared virtual machine it says how much of a cell's timings
    ran on a machine that was partly somebody else's; NaN where it cannot be read."""
    if before is None or after is None:
        return float("nan")
    d = after - before
    total = d.sum()
    return float(d[7] / total) if total > 0 else float("nan")


def paired_quartiles(num, den) -> tuple[float, float]:
    """25th and 75th percentiles of the per-round ratios ``num[r] / den[r]``. Two variants timed in
    the same round saw the same machine, so the spread of their ratio across rounds says how far
    the ratio of medians can be trusted on a host whose speed drifts. Where one variant was timed
    in fewer rounds, the rounds both have are paired."""
    r = _paired_ratios(num, den)
    return float(np.percentile(r, 25)), float(np.percentile(r, 75))


def paired_median(num, den) -> float:
    """Median of the per-round ratios ``num[r] / den[r]`` over the rounds both have (see
    :func:`paired_quartiles`)."""
    return float(np.median(_paired_ratios(num, den)))


def _paired_ratios(num, den) -> np.ndarray:
    k = min(len(num), len(den))
    return np.asarray(num[:k], dtype=float) / np.asarray(den[:k], dtype=float)


def time_interleaved(fns: dict, min_rounds: int = 3, max_rounds: int = 40, target_s: float = 20.0,
                     memory: PeakMemory | None = None, warmup=None, once=None) -> tuple[dict, dict]:
    """Seconds per call of each function in every round, timed in interleaved rounds (every variant once
    per round, after one warm-up call each, which also absorbs any compilation), so that drifts
    of the machine's speed hit all variants alike. The first timed round sets how many follow:
    cheap cells get more rounds (up to ``max_rounds``, about ``target_s`` seconds in all), since
    a burst of load on a shared host can swamp a short call (on the 2-core VM the benchmark was
    run on, other guests stole up to two fifths of the CPU time in 5 s samples; 15 rounds left
    the median of a 0.1 s call a few percent uncertain). With ``memory``, each function's
    peak memory is read in one more untimed call after its warm-up. ``warmup``: one call that
    replaces the warm-up calls (for calls that take minutes and compile nothing). ``once(name)``,
    asked after the first round: true for a function that is not timed again (its list holds one
    time)."""
    peaks = {}
    if warmup is not None:
        warmup()
    for k, fn in fns.items():
        if warmup is None:
            fn()
        if memory is not None:
            peaks[k] = memory.measure(fn)
    out = {k: [] for k in fns}
    rounds, r = min_rounds, 0
    timed = fns                         # every function in the first round; ``once`` may drop some after it
    while r < rounds:
        for k, fn in timed.items():
            t = time.perf_counter()
            fn()
            out[k].append(time.perf_counter() - t)
        if r == 0:
            first = sum(v[0] for v in out.values())
            rounds = int(min(max_rounds, max(min_rounds, np.ceil(target_s / max(first, 1e-9)))))
            if once is not None:
                timed = {k: fn for k, fn in fns.items() if not once(k)}
        r += 1
    return out, peaks
