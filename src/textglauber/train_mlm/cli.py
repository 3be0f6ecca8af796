"""Train an English masked LM offline (the `offline` profile has no other).

The command line, ``python -m textglauber.train_mlm`` (see :mod:`textglauber.train_mlm`)."""
from __future__ import annotations

import argparse

from .presets import PRESETS, TrainingTimeGuard
from .run import train


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m textglauber.train_mlm", description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="english", choices=sorted(PRESETS))
    ap.add_argument("--out", default=None, help="output folder (default: _build/models/PRESET)")
    ap.add_argument("--max-steps", type=int, default=None, help="train every start for this many steps instead")
    ap.add_argument("--max-hours", type=float, default=None,
                    help="guard, not a budget: stop with an error (state kept) after this many hours")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    try:
        m = train(a.preset, a.out, a.max_steps, a.seed, progress=True, max_hours=a.max_hours)
    except TrainingTimeGuard as exc:
        raise SystemExit(str(exc)) from None
    f = m["final"]
    print(f"chosen start: {m['chosen']}; held-out top-1 {f['top1']:.4f}, top-5 {f['top5']:.4f}, "
          f"pseudo-perplexity {f['pseudo_perplexity']:.2f}")
    for r in m["runs"]:
        print(f"  {r['start']}: {r['steps']} steps, {r['tokens_seen']} tokens, top-1 {r['final']['top1']:.4f}, "
              f"{r['seconds']:.0f} s wall, {r['cpu_seconds']:.0f} s process CPU on {r['threads']} threads")
    return 0
