"""The expensive intermediates a profile lists among its ``artifacts``, each built once and cached:
the stand-ins (``_build/standins/``), a short benchmark (``bench*``, into ``results/bench/``) and
the training presets (``_build/models/<name>``); and which chapters read each, so that a build
builds only those its chapters read."""
from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

from ..bench import cache as bench_cache
from ..paths import repo_root
from .stamps import models_read


def build_artifacts(names: list[str], results_root: Path | None = None) -> None:
    """Expensive intermediates a profile needs, each built once and cached: ``standins`` (the
    paper profile's local stand-ins, _build/standins/), a short benchmark (``bench*``, see
    :mod:`textglauber.bench.cache`, into results/bench/) or a training preset (_build/models/<name>)."""
    from .. import train_mlm          # torch-free unless a model is to be trained

    for name in names:
        if name == "standins":
            from .. import standins

            standins.ensure()
        elif name in bench_cache.PRESETS:
            bench_cache.ensure(name, results_root or repo_root() / "results")
        else:
            train_mlm.ensure(name)


def artifact_readers(spec: dict, name: str) -> list[str]:
    """The chapters of a profile that read one of its ``artifacts``: a benchmark preset's table is
    read by the chapters whose ``reads_files`` match it (the cost appendix: ``results/bench/*``),
    the stand-ins by the chapters naming a path under ``_build/standins/``, a training preset
    ``NAME`` by the chapters naming ``trained:NAME`` (a model, embedder, or ``training_run``)."""
    def strings(value):
        if isinstance(value, dict):
            for v in value.values():
                yield from strings(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                yield from strings(v)
        elif isinstance(value, str):
            yield value

    if name in bench_cache.PRESETS:
        written = [f"results/bench/{p.name}" for p in bench_cache.paths(name, Path("results"))]

        def reads(ch: dict, prm: dict) -> bool:
            return any(fnmatch.fnmatch(w, pattern) for pattern in ch.get("reads_files", []) for w in written)
    elif name == "standins":
        def reads(ch: dict, prm: dict) -> bool:
            return any(Path(os.path.normpath(s)).parts[:2] == ("_build", "standins") for s in strings(prm))
    else:
        named = re.compile(rf"(?<![\w.-])trained:{re.escape(name)}(?![\w.-])")

        def reads(ch: dict, prm: dict) -> bool:
            return (any(m.partition("@")[0] == f"trained:{name}" for m in models_read(prm, ch["notebook"]))
                    or any(named.search(s) for s in strings(prm)))
    out = []
    for chapter, ch in spec["chapters"].items():
        prm = {**spec.get("defaults", {}), **ch.get("parameters", {})}
        if reads(ch, prm):
            out.append(chapter)
    return out


def artifacts_needed(spec: dict, chapters: list[str], log=print) -> list[str]:
    """The profile's ``artifacts`` that one of ``chapters`` reads (:func:`artifact_readers`), in the
    profile's order; one line for each left out, so a build of one chapter spends no time on an
    artifact only another chapter reads (the benchmark takes minutes)."""
    needed = []
    for name in spec.get("artifacts", []):
        readers = artifact_readers(spec, name)
        if set(readers) & set(chapters):
            needed.append(name)
        else:
            log(f"artifact {name} not built: no chapter of this build reads it"
                + (f" (read by {', '.join(readers)})" if readers else ""), flush=True)
    return needed
