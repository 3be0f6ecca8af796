"""Execute the chapters of a profile with papermill, then build the book with Jupyter Book 1.

    python -m textglauber.build --profile smoke                 # every chapter that changed, then the site
    python -m textglauber.build --profile smoke --force         # every chapter, changed or not
    python -m textglauber.build --profile smoke --chapter incompatibility   # this one, changed or not
    python -m textglauber.build --profile smoke --no-execute    # rebuild the site only

Layout (all build products, none tracked):

- ``_build/<profile>/``          staging copy of the book: _config.yml, _toc.yml, book/*.md and
                                 the executed notebooks (sources stay clean);
- ``_build/<profile>/_build/html`` the site;
- ``_build/<profile>/_build/stamps/`` a stamp and the executed notebook per finished chapter
                                 (:mod:`textglauber.buildcache`);
- ``results/<profile>/<chapter>/`` parquet tables and manifest.json written by each chapter.

Chapters run in the order their data flows (a chapter after those whose results it ``reads``,
see :mod:`textglauber.params`). A chapter whose inputs are unchanged since its last finished run,
and whose outputs are all still there, is skipped with a line that says so; one that changed, or
``--force``, or a chapter named with ``--chapter``, is executed again.

Every model a selected chapter names is resolved before anything runs, so a missing model
gives one clear message and no compute is spent.

First of all the build prints its plan: each artifact and chapter it will build, resume, run or
skip, with the time each is expected to take here; while a chapter runs, a progress line with the
time left about every minute (:mod:`textglauber.plan`).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import buildcache as cache
from . import params as P
from . import plan
from .paths import repo_root

BOOK_FILES = ("_config.yml", "_toc.yml")
QUIET_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error",
             "TOKENIZERS_PARALLELISM": "false", "PYTHONWARNINGS": "ignore"}


def preflight(profile: str, chapters: list[str]) -> None:
    """Every model and corpus the chapters need, resolved before any compute: one message each
    for what is missing, and the fix. Each model's files are also checked against the role its
    chapter gives it (masked LM, causal control, sentence model, NLI classifier), without loading
    weights; that holds in chapters that skip missing models too."""
    from . import corpus
    from .models import ModelUnavailableError, check_models, wanted_models

    names, corpora = [], []
    for ch in chapters:
        prm = P.chapter_parameters(profile, ch)
        required = prm.get("on_missing_model", "fail") == "fail"
        names += wanted_models(prm, ch, required)
        if required:
            corpora += P.corpus_names(prm)
    problems = []
    for check, items, error in ((check_models, names, ModelUnavailableError),
                                (corpus.check_available, sorted(set(corpora)), corpus.CorpusUnavailableError)):
        try:
            check(items)
        except error as exc:
            problems.append(str(exc))
    problems += P.window_problems(profile, chapters)       # a window longer than its corpus holds
    problems += _length_problems(profile, chapters)         # a window longer than its model takes
    if problems:
        raise SystemExit(f"profile {profile!r} cannot run:\n" + "\n".join(problems))


def _length_problems(profile: str, chapters: list[str]) -> list[str]:
    """Windows longer than a chapter's masked or causal LMs take (config.json alone, no weights)."""
    from .models import length_problems, wanted_models

    out = []
    for ch in chapters:
        prm = P.chapter_parameters(profile, ch)
        longest = {k: max(v) if isinstance(v, list) else v for k, v in prm.items() if k in P.WINDOW_KEYS and v}
        for key, n in longest.items():
            out += [f"{P.where(P.profile_path(profile))}: chapter {ch!r}: {line}"
                    for line in length_problems(wanted_models(prm, ch), int(n), key)]
    return out


def build_artifacts(names: list[str], results_root: Path | None = None) -> None:
    """Expensive intermediates a profile needs, each built once and cached: ``standins`` (the
    paper profile's local stand-ins, _build/standins/), a short benchmark (``bench*``, see
    :mod:`textglauber.benchcache`, into results/bench/) or a training preset (_build/models/<name>)."""
    from . import benchcache, standins, train_mlm

    for name in names:
        if name == "standins":
            standins.ensure()
        elif name in benchcache.PRESETS:
            benchcache.ensure(name, results_root or repo_root() / "results")
        else:
            train_mlm.ensure(name)


def stage(profile: str, build_root: Path) -> Path:
    root = repo_root()
    dst = build_root / profile
    (dst / "book").mkdir(parents=True, exist_ok=True)
    legacy = dst / ".stamps"       # where stamps lay at first: the site build read the notebooks there
    if legacy.is_dir():
        cache.stamps_dir(dst).mkdir(parents=True, exist_ok=True)
        for f in legacy.iterdir():
            if not (cache.stamps_dir(dst) / f.name).exists():
                os.replace(f, cache.stamps_dir(dst) / f.name)
        shutil.rmtree(legacy)
    for f in BOOK_FILES:
        shutil.copy2(root / f, dst / f)
    for f in (root / "book").iterdir():
        if f.suffix == ".ipynb":
            if not (dst / "book" / f.name).exists():   # a chapter not executed yet renders as source
                shutil.copy2(f, dst / "book" / f.name)
        elif f.is_file():
            shutil.copy2(f, dst / "book" / f.name)
        elif f.is_dir() and not f.name.startswith((".", "_")):
            shutil.copytree(f, dst / "book" / f.name, dirs_exist_ok=True)
    return dst


def execute(profile: str, chapter: str, staged: Path, results_root: Path, spec: dict | None = None) -> float:
    """Run one chapter with papermill and render its page. The executed notebook replaces the last
    one only once it has run through (papermill saves after every cell, so it writes to a partial
    file first)."""
    import papermill as pm

    spec = spec or P.load_profile(profile)
    nb = spec["chapters"][chapter]["notebook"]
    prm = P.chapter_parameters(profile, chapter, results_root, spec=spec)
    partial = cache.partial_notebook(staged, chapter)
    partial.parent.mkdir(parents=True, exist_ok=True)
    os.environ.update(QUIET_ENV)
    t0 = time.time()
    print(f"[{profile}] executing {nb} ...", flush=True)
    with plan.watch(profile, chapter, partial, staged, results_root):     # a progress line every minute
        pm.execute_notebook(str(repo_root() / nb), str(partial), parameters=prm, cwd=str(repo_root() / "book"),
                            kernel_name="python3", progress_bar=False, log_output=False)
    relativize(partial)                  # the kept notebook names no folder of the build machine either
    os.replace(partial, cache.executed_notebook(staged, chapter))
    render(staged, chapter, nb)
    dt = time.time() - t0
    print(f"[{profile}] {chapter}: {dt:.0f} s", flush=True)
    record_timing(results_root / profile, chapter, dt)
    return dt


def record_timing(folder: Path, chapter: str, seconds: float) -> None:
    """Wall time of each chapter's last execution, for the cost appendix."""
    import json

    from .provenance import machine_line

    path = folder / "timings.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[chapter] = {"seconds": round(seconds, 1), "machine": machine_line(),
                     "when": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    cache.write_json_atomic(path, data)


def render(staged: Path, chapter: str, notebook: str) -> None:
    """The chapter's page from its executed notebook, written only where it changes (the site build
    re-reads what is newer)."""
    page = staged / notebook
    tmp = cache.partial_notebook(staged, chapter).with_suffix(".render.ipynb")
    shutil.copyfile(cache.executed_notebook(staged, chapter), tmp)
    tidy_executed(tmp, output_path=page)
    if page.is_file() and page.read_bytes() == tmp.read_bytes():
        tmp.unlink()
    else:
        os.replace(tmp, page)


def upstream_problem(spec: dict, profile: str, chapter: str, staged: Path, results_root: Path) -> str | None:
    """Why ``chapter`` must not run yet: a chapter it reads left results without finishing them."""
    for up in spec["chapters"][chapter]["reads"]:
        folder = results_root / profile / up
        if not cache.tree_digests(folder):
            continue            # never run here: the chapter says on its page that they are missing
        stamp = cache.read_stamp(cache.stamp_path(staged, up))
        why = "no finished run recorded" if stamp is None else cache.missing_outputs(
            stamp, cache.executed_notebook(staged, up), folder)
        if why:
            return (f"{chapter} reads the results of {up}, which are not complete here ({why}); "
                    f"execute {up} first (./run_all.sh --chapter {up} --chapter {chapter})")
    return None


def run_chapters(profile: str, spec: dict, chapters: list[str], staged: Path, results_root: Path,
                 forced: str | None = None) -> list[str]:
    """Execute what changed among ``chapters`` in data order, skip the rest; return those executed.
    ``forced`` (a reason) executes every one of them regardless."""
    done = []
    for ch in P.build_order(spec, chapters):
        nb = cache.executed_notebook(staged, ch)
        stamp = cache.stamp_path(staged, ch)
        inputs = cache.chapter_inputs(spec, profile, ch, results_root)
        complete, why = cache.status(stamp, inputs, nb, results_root / profile / ch)
        if complete and not forced:
            print(f"[{profile}] skipped {ch}: {why}", flush=True)
            render(staged, ch, spec["chapters"][ch]["notebook"])
            continue
        problem = upstream_problem(spec, profile, ch, staged, results_root)
        if problem:
            raise SystemExit(problem)
        print(f"[{profile}] {ch} runs: {forced or why}", flush=True)
        cache.clear(stamp)                   # from here until the new stamp, the chapter is incomplete
        seconds = execute(profile, ch, staged, results_root, spec)
        cache.write_stamp(stamp, inputs, nb, results_root / profile / ch, seconds)
        done.append(ch)
    return done


def tidy_executed(nb_path: Path, output_path: Path | None = None) -> None:
    """Tidy an executed notebook for the site (``output_path``: where it will lie, for its metadata).

    Widget outputs (progress bars that escaped) and widget state go: the site would load their
    JavaScript from a CDN. The notebook's default parameters cell is hidden behind the cell
    papermill injected, which holds the values that actually ran; the other code cells fold
    behind a toggle. Paths inside the repository are shown relative to it (the injected
    ``results_root``, printed paths, papermill's record): no page shows the build machine's folders.
    """
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    nb.metadata.pop("widgets", None)
    if output_path is not None and "papermill" in nb.metadata:
        nb.metadata["papermill"]["output_path"] = str(output_path)
    injected = any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells)
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if injected and "parameters" in tags and "remove-cell" not in tags:
            cell.metadata["tags"] = tags + ["remove-cell"]
        elif cell.cell_type == "code" and not {"injected-parameters", "hide-input", "remove-input"} & set(tags):
            cell.metadata["tags"] = tags + ["hide-input"]     # the page reads as prose, tables, figures
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if "application/vnd.jupyter.widget-view+json" not in o.get("data", {})]
    _make_relative(nb)        # stamps kept before build.relativize existed still hold absolute paths
    nbformat.write(nb, nb_path)


def relativize(nb_path: Path) -> None:
    """Rewrite an executed notebook in place with the repository's absolute paths made relative,
    and nothing else changed: what the build keeps as a chapter's executed notebook then shows no
    folder of the machine that ran it."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    _make_relative(nb)
    nbformat.write(nb, nb_path)


def _make_relative(nb) -> None:
    """The repository's absolute paths made relative in a notebook's metadata, sources and outputs
    (images untouched)."""
    root = str(repo_root())
    nb.metadata = relative_paths(nb.metadata, root)
    for cell in nb.cells:
        cell.source = relative_paths(cell.source, root)
        if cell.cell_type == "code":
            cell.outputs = [relative_paths(o, root) for o in cell.outputs]


def relative_paths(obj, root: str):
    """``obj`` (text, or an output or metadata mapping) with ``root``'s absolute paths made relative
    to it; images are left alone."""
    if isinstance(obj, str):
        return obj.replace(root + "/", "").replace(root, ".")
    if isinstance(obj, list):
        return [relative_paths(v, root) for v in obj]
    if isinstance(obj, dict):
        return type(obj)({k: v if str(k).startswith("image/") else relative_paths(v, root) for k, v in obj.items()})
    return obj


FRONT = "book/00_findings.ipynb"      # the findings page, computed from the results after the chapters


def execute_front(profile: str, staged: Path, results_root: Path) -> None:
    """The findings page from the results as they are now: on every build, since it takes seconds."""
    import papermill as pm

    partial = staged / "book" / ".00_findings.partial.ipynb"
    print(f"[{profile}] executing {FRONT} ...", flush=True)
    pm.execute_notebook(str(repo_root() / FRONT), str(partial), cwd=str(repo_root() / "book"), kernel_name="python3",
                        parameters={"profile": profile, "results_root": str(results_root),
                                    "stamps": str(cache.stamps_dir(staged))}, progress_bar=False,
                        log_output=False)
    tidy_executed(partial, output_path=staged / FRONT)
    os.replace(partial, staged / FRONT)


def browser_check(html_dir: Path) -> list[str]:
    """Every page in headless Chromium (:mod:`textglauber.sitecheck`), screenshots beside the site;
    skipped, with a line that says so, where no chromium program is installed."""
    from . import sitecheck

    if sitecheck.find_chromium() is None:
        print("browser check skipped: no chromium program (Debian: apt-get install chromium)", file=sys.stderr)
        return []
    shots = html_dir.parent / "screenshots"
    problems = sitecheck.check_site(html_dir, shots)
    print(f"browser check: {len(sitecheck.pages(html_dir))} pages at {' and '.join(map(str, sitecheck.WIDTHS))} px, "
          f"{len(problems)} problems; screenshots in {shots}", flush=True)
    return problems


def build_site(staged: Path) -> Path:
    cmd = [sys.executable, "-m", "jupyter_book", "build", str(staged), "-W", "-n", "--keep-going"]
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    if jb:
        cmd = [jb, "build", str(staged), "-W", "-n", "--keep-going"]
    subprocess.run(cmd, check=True)
    return staged / "_build" / "html"


_NET = re.compile(r"""(?:src|href)\s*=\s*["'](?:https?:)?//[^"']+["']""", re.I)
_CSS_NET = re.compile(r"""(?:@import\s+(?:url\()?|url\()\s*["']?(?:https?:)?//""", re.I)


def network_loads(html_dir: Path) -> list[str]:
    """Things the site would fetch from the network: scripts, styles, images, fonts, frames.

    Plain links (<a href>) are navigation, not loads, and are allowed.
    """
    bad = []
    for f in sorted(html_dir.rglob("*")):
        if f.suffix == ".html":
            text = f.read_text(errors="ignore")
            for tag in re.finditer(r"<(script|link|img|iframe|source|video|audio|embed|object)\b[^>]*>", text, re.I):
                if tag.group(1).lower() == "link" and not re.search(r"rel\s*=\s*[\"']?[^\"'>]*(stylesheet|preload|icon|modulepreload)", tag.group(0), re.I):
                    continue
                if _NET.search(tag.group(0)):
                    bad.append(f"{f.relative_to(html_dir)}: {tag.group(0)[:160]}")
        elif f.suffix == ".css":
            if _CSS_NET.search(f.read_text(errors="ignore")):
                bad.append(f"{f.relative_to(html_dir)}: url() to the network")
    return bad


def check_site(html_dir: Path, chapters: dict) -> list[str]:
    """Problems with a built site: a missing chapter page, a chapter without figures, network loads."""
    problems = []
    for name, ch in chapters.items():
        page = html_dir / (Path(ch["notebook"]).with_suffix(".html"))
        if not page.exists():
            problems.append(f"chapter {name}: no page {page.name}")
            continue
        if not re.search(r"<img[^>]+src=\"[^\"]+\.(png|svg|jpg)\"", page.read_text(errors="ignore")):
            problems.append(f"chapter {name}: the page shows no figure")
    problems += network_loads(html_dir)
    return problems


@cache.holding_locks              # the locks main takes go when it returns or raises (SIGTERM included)
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m textglauber.build", description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--chapter", action="append", help="execute only this chapter, changed or not (repeatable)")
    ap.add_argument("--force", action="store_true", help="execute the chapters even where nothing changed")
    ap.add_argument("--no-execute", action="store_true", help="build the site from what is staged")
    ap.add_argument("--no-book", action="store_true", help="execute chapters only")
    ap.add_argument("--build-dir", default=str(repo_root() / "_build"))
    ap.add_argument("--results", default=str(repo_root() / "results"))
    a = ap.parse_args(argv)
    P.validate_or_exit(a.profile, a.chapter)     # every key, type, range and relation, before anything loads
    try:
        spec = P.load_profile(a.profile)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    chapters = a.chapter or list(spec["chapters"])
    unknown = [c for c in chapters if c not in spec["chapters"]]
    if unknown:
        raise SystemExit(f"unknown chapter(s) {unknown}; profile {a.profile!r} has {list(spec['chapters'])}")
    staging, results_root = Path(a.build_dir) / a.profile, Path(a.results).resolve()
    cache.check_writable(cache.written_folders(staging, results_root, a.profile, [] if a.no_execute else chapters))
    cache.lock_build(cache.lock_paths(staging, results_root, a.profile), f"profile {a.profile!r}")  # until main ends
    staged = stage(a.profile, Path(a.build_dir))
    if a.no_execute:                   # pages from the notebooks the chapters last executed
        for ch in chapters:
            if cache.executed_notebook(staged, ch).is_file():
                render(staged, ch, spec["chapters"][ch]["notebook"])
    else:
        plan.announce(a.profile, spec, chapters, staged, Path(a.results).resolve(),   # what runs, and for how long
                      "--force" if a.force else "named with --chapter" if a.chapter else None)
        build_artifacts(cache.artifacts_needed(spec, chapters), Path(a.results).resolve())
        preflight(a.profile, chapters)
        forced = "--force" if a.force else "named with --chapter" if a.chapter else None
        run_chapters(a.profile, spec, chapters, staged, Path(a.results).resolve(), forced)
        if not a.no_book:
            execute_front(a.profile, staged, Path(a.results).resolve())
    if a.no_book:
        return 0
    html = build_site(staged)
    problems = check_site(html, spec["chapters"]) + browser_check(html)
    if problems:
        print("the built site has problems:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"\nThe book is at {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
