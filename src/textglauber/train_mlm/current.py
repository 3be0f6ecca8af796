"""Whether a preset's model is trained as the preset is now, and training it where it is not. No
torch here: a build whose models are all current asks this and loads no framework."""
from __future__ import annotations

import json
from pathlib import Path

from ..paths import models_root
from .presets import RESUME_FORMAT, resolve_preset


def is_current(out: Path, preset_name: str, seed: int = 0) -> bool:
    """Cheap check that ``out`` holds a finished run of the preset as it is now (settings and seed)."""
    try:
        key = json.loads((out / "manifest.json").read_text())["resume_key"]
    except (OSError, KeyError, ValueError):
        return False
    _, preset = resolve_preset(preset_name)
    return ((out / "final" / "config.json").exists() and key.get("format") == RESUME_FORMAT
            and key.get("seed") == seed and key.get("settings") == preset.weight_settings())


def ensure(preset_name: str, progress: bool = True) -> Path:
    """The trained model's folder, training it first if it is missing or was trained under other
    settings (a one-time step); an interrupted training resumes where it stopped."""
    out = models_root() / preset_name
    if not is_current(out, preset_name):
        from .run import train         # torch: only when there is training to do

        if progress and (out / "manifest.json").exists():
            print(f"{out} was trained under other settings; training it again")
        train(preset_name, progress=progress, reuse=True)
    return out
