"""Running the chapters: the staged copy of the book, each chapter executed with papermill in
data order (skipped where its stamp says nothing changed), its wall time recorded, its page rendered
from the executed notebook with hidden cells and no absolute path of the build machine; then the
findings page, from the results as they are."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from .. import profile as P
from ..paths import repo_root
from ..provenance import machine_line, write_json_atomic
from ..results import REPLAY_ENV
from . import replay, stamps
from .preflight import preflight
from .progress import watch

BOOK_FILES = ("_config.yml", "_toc.yml")
QUIET_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error",
             "TOKENIZERS_PARALLELISM": "false", "PYTHONWARNINGS": "ignore"}


def stage(profile: str, build_root: Path) -> Path:
    root = repo_root()
    dst = build_root / profile
    (dst / "book").mkdir(parents=True, exist_ok=True)
    legacy = dst / ".stamps"       # where stamps lay at first: the site build read the notebooks there
    if legacy.is_dir():
        stamps.stamps_dir(dst).mkdir(parents=True, exist_ok=True)
        for f in legacy.iterdir():
            if not (stamps.stamps_dir(dst) / f.name).exists():
                os.replace(f, stamps.stamps_dir(dst) / f.name)
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


def _papermill(profile: str, chapter: str, staged: Path, results_root: Path, spec: dict, prepared,
               save_every_cell: bool = True) -> Path:
    """Execute ``prepared`` (the chapter's notebook as :mod:`.replay` made it) with the chapter's
    parameters into its partial notebook, which is returned. ``save_every_cell``: the partial
    notebook is written after each cell (what a full run's progress lines and a failed run's
    traceback are read from); a re-render, seconds long and run again in full where it stops, skips it."""
    import nbformat
    import papermill as pm

    prm = P.chapter_parameters(profile, chapter, results_root, spec=spec)
    partial = stamps.partial_notebook(staged, chapter)
    source = partial.parent / "source" / Path(spec["chapters"][chapter]["notebook"]).name
    source.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.from_dict(prepared), source)
    os.environ.update(QUIET_ENV)
    with watch(profile, chapter, partial, staged, results_root):     # a progress line every minute
        pm.execute_notebook(str(source), str(partial), parameters=prm, cwd=str(repo_root() / "book"),
                            kernel_name="python3", progress_bar=False, log_output=False,
                            request_save_on_cell_execute=save_every_cell)
    source.unlink()
    return partial


def execute(profile: str, chapter: str, staged: Path, results_root: Path, spec: dict | None = None,
            probe: tuple[float, float] | None = None) -> float:
    """Run one chapter with papermill and render its page. The executed notebook replaces the last
    one only once it has run through (papermill saves after every cell, so it writes to a partial
    file first); so do what its compute cells left for a re-render (:mod:`.replay`)."""
    import nbformat

    spec = spec or P.load_profile(profile)
    nb = spec["chapters"][chapter]["notebook"]
    executed = stamps.executed_notebook(staged, chapter)
    snaps = stamps.snapshots_of(executed)
    fresh = snaps.with_name(snaps.name + ".run")
    shutil.rmtree(fresh, ignore_errors=True)
    t0 = time.time()
    print(f"[{profile}] executing {nb} ...", flush=True)
    source = nbformat.read(repo_root() / nb, as_version=4)
    partial = _papermill(profile, chapter, staged, results_root, spec, replay.with_snapshots(source, fresh))
    nbformat.write(replay.without_helpers(nbformat.read(partial, as_version=4)), partial)
    relativize(partial)                  # the kept notebook names no folder of the build machine either
    shutil.rmtree(snaps, ignore_errors=True)
    if fresh.is_dir():
        os.replace(fresh, snaps)
    os.replace(partial, executed)
    render(staged, chapter, nb)
    dt = time.time() - t0
    print(f"[{profile}] {chapter}: {dt:.0f} s", flush=True)
    record_timing(results_root / profile, chapter, dt, probe)
    return dt


def rerender(profile: str, chapter: str, staged: Path, results_root: Path, spec: dict) -> float:
    """Re-render one chapter from its last full run (:mod:`.replay`): its compute cells put back what
    they left, every other cell runs with the page modules as they are now, and nothing is written
    to its results (their manifest checks that they would come out the same). Raises what stopped
    it; the caller then runs the chapter in full."""
    import nbformat

    nb = spec["chapters"][chapter]["notebook"]
    executed = stamps.executed_notebook(staged, chapter)
    t0 = time.time()
    print(f"[{profile}] re-rendering {nb} from its last full run ...", flush=True)
    source = nbformat.read(repo_root() / nb, as_version=4)
    os.environ[REPLAY_ENV] = "1"
    try:
        partial = _papermill(profile, chapter, staged, results_root, spec,
                             replay.with_loads(source, stamps.snapshots_of(executed)), save_every_cell=False)
    finally:
        os.environ.pop(REPLAY_ENV, None)
    spliced = replay.splice(nbformat.read(partial, as_version=4), nbformat.read(executed, as_version=4))
    nbformat.write(spliced, partial)
    relativize(partial)
    os.replace(partial, executed)
    render(staged, chapter, nb)
    dt = time.time() - t0
    print(f"[{profile}] {chapter}: re-rendered in {dt:.0f} s", flush=True)
    return dt


def record_timing(folder: Path, chapter: str, seconds: float, probe: tuple[float, float] | None = None) -> None:
    """Wall time of each chapter's last execution, for the findings page and the plan, with the
    build's probe reading (one thread, torch's threads) where its plan took one: what a measured
    build gives the plan's calibration (:mod:`textglauber.bookbuild.estimates.records`). A file that
    cannot be read is named, moved aside (``timings.json.unreadable``) and started afresh."""
    path = folder / "timings.json"
    data = stamps.read_timings(path)
    if path.exists() and not data and path.read_text().strip() not in ("{}", ""):
        os.replace(path, path.with_name("timings.json.unreadable"))
        print(f"{path}: not a record of wall times; moved aside to timings.json.unreadable", flush=True)
    data[chapter] = {"seconds": round(seconds, 1), "machine": machine_line(),
                     "when": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    if probe is not None:
        data[chapter]["probe"] = [round(float(probe[0]), 4), round(float(probe[1]), 4)]
    write_json_atomic(path, data)


def render(staged: Path, chapter: str, notebook: str) -> None:
    """The chapter's page from its executed notebook with the source's current prose
    (:func:`with_current_prose`), written only where it changes (the site build re-reads what is
    newer)."""
    import nbformat

    page = staged / notebook
    tmp = stamps.partial_notebook(staged, chapter).with_suffix(".render.ipynb")
    nb = with_current_prose(nbformat.read(stamps.executed_notebook(staged, chapter), as_version=4),
                            nbformat.read(repo_root() / notebook, as_version=4))
    nbformat.write(nb, tmp)
    tidy_executed(tmp, output_path=page)
    if page.is_file() and page.read_bytes() == tmp.read_bytes():
        tmp.unlink()
    else:
        os.replace(tmp, page)


def with_current_prose(executed, source):
    """``executed`` (a notebook papermill ran) with the markdown cells of ``source`` (the notebook as
    it is now), in the source's order: each code cell keeps its outputs, and the cell papermill
    injected stays right after the parameters cell. The stamp's key holds the code cells alone, so
    a chapter skipped since a prose edit shows the new prose with the outputs of the same code.
    Where the code cells differ (they cannot while the key matches) ``executed`` is returned as is."""
    injected = [c for c in executed.cells if "injected-parameters" in replay.tags(c)]
    ran = [c for c in executed.cells if c.cell_type == "code" and "injected-parameters" not in replay.tags(c)]
    code = [c for c in source.cells if c.cell_type == "code"]
    if len(ran) != len(code) or any(a.source != b.source for a, b in zip(ran, code)):
        return executed
    cells, outputs = [], iter(ran)
    for c in source.cells:
        if c.cell_type != "code":
            cells.append(c)
            continue
        cells.append(next(outputs))
        if "parameters" in replay.tags(c):
            cells += injected
    if injected and not any("parameters" in replay.tags(c) for c in code):
        cells = injected + cells                  # papermill puts it first where no cell is tagged
    executed.cells = cells
    return executed


def upstream_problem(spec: dict, profile: str, chapter: str, staged: Path, results_root: Path) -> str | None:
    """Why ``chapter`` must not run yet: a chapter it reads left results without finishing them."""
    for up in spec["chapters"][chapter]["reads"]:
        folder = results_root / profile / up
        if not stamps.tree_digests(folder):
            continue            # never run here: the chapter says on its page that they are missing
        stamp = stamps.read_stamp(stamps.stamp_path(staged, up))
        why = "no finished run recorded" if stamp is None else stamps.missing_outputs(
            stamp, stamps.executed_notebook(staged, up), folder)
        if why:
            return (f"{chapter} reads the results of {up}, which are not complete here ({why}); "
                    f"execute {up} first (./run_all.sh --chapter {up} --chapter {chapter})")
    return None


def run_chapters(profile: str, spec: dict, chapters: list[str], staged: Path, results_root: Path,
                 forced: str | None = None, probe: tuple[float, float] | None = None,
                 checked: set[str] | None = None) -> list[str]:
    """Execute what changed among ``chapters`` in data order, skip the rest; return those executed.
    ``forced`` (a reason) executes every one of them regardless; ``probe``, the plan's reading, is
    recorded beside each executed chapter's time (:func:`record_timing`). ``checked``: the chapters
    whose models and corpora the build's pre-flight has resolved; any other that is to run in full
    (a re-render that stopped) is checked before it runs. None: every chapter was checked."""
    done = []
    for ch in P.build_order(spec, chapters):
        nb = stamps.executed_notebook(staged, ch)
        stamp = stamps.stamp_path(staged, ch)
        inputs = stamps.chapter_inputs(spec, profile, ch, results_root)
        what, why = stamps.action(stamp, inputs, nb, results_root / profile / ch)
        if what == "skip" and not forced:
            print(f"[{profile}] skipped {ch}: {why}", flush=True)
            render(staged, ch, spec["chapters"][ch]["notebook"])
            continue
        if what == "render" and not forced and _rerendered(profile, ch, staged, results_root, spec, why):
            stamps.write_stamp(stamp, inputs, nb, results_root / profile / ch, stamps.read_stamp(stamp)["seconds"],
                               stamps.snapshots_of(nb))
            continue
        problem = upstream_problem(spec, profile, ch, staged, results_root)
        if problem:
            raise SystemExit(problem)
        if checked is not None and ch not in checked:
            preflight(profile, [ch])
            checked.add(ch)
        print(f"[{profile}] {ch} runs: {forced or why}", flush=True)
        seconds = failed_in_one_line(profile, ch, staged, execute, profile, ch, staged, results_root, spec, probe)
        failed_in_one_line(profile, ch, staged, stamps.write_stamp, stamp, inputs, nb, results_root / profile / ch,
                           seconds, stamps.snapshots_of(nb))
        done.append(ch)
    return done


def _rerendered(profile: str, chapter: str, staged: Path, results_root: Path, spec: dict, why: str) -> bool:
    """Whether :func:`rerender` did it; where anything stopped it (an object the last run could not
    store, results that would change, any error), one line says so and the chapter runs in full."""
    from papermill.exceptions import PapermillExecutionError

    print(f"[{profile}] {chapter}: {why}", flush=True)
    try:
        rerender(profile, chapter, staged, results_root, spec)
        return True
    except PapermillExecutionError as exc:
        reason = f"{exc.ename}: {' '.join(str(exc.evalue).split())}"
    except Exception as exc:          # a re-render is never the last word: the full run decides
        reason = f"{type(exc).__name__}: {exc}"
    print(f"[{profile}] {chapter}: the re-render stopped ({reason[:300]}); the chapter runs in full", flush=True)
    return False


def failed_in_one_line(profile: str, chapter: str, staged: Path, fn, *args):
    """``fn(*args)``, with a chapter that fails stopping the build in one line that names the
    error, the file where it can be read in full, and that the last good results are kept (the
    run's tables never replaced them: :func:`textglauber.results.chapter_dir`). A chapter's own
    one-line errors (a refused parameter, a full disk) read as they are."""
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    kept = "its last complete results and stamp are kept"
    try:
        return fn(*args)
    except DeadKernelError:
        raise SystemExit(f"[{profile}] chapter {chapter!r} failed: its kernel died (killed, or out of memory) ({kept}; "
                         f"the run's notebook as far as it got: {stamps.partial_notebook(staged, chapter)})") from None
    except PapermillExecutionError as exc:
        detail = " ".join(str(exc.evalue).split()) or exc.ename
        raise SystemExit(f"[{profile}] chapter {chapter!r} failed: {exc.ename}: {detail} ({kept}; the failed "
                         f"run's notebook, with its traceback: {stamps.partial_notebook(staged, chapter)})") from None
    except OSError as exc:
        where = exc.filename or "a file of the build"
        raise SystemExit(f"[{profile}] chapter {chapter!r} failed: {where}: {exc.strerror or exc} ({kept}; "
                         "free space or fix the folder's permissions and build again)") from None


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
    injected = any("injected-parameters" in replay.tags(c) for c in nb.cells)
    for cell in nb.cells:
        tags = replay.tags(cell)
        if injected and "parameters" in tags and "remove-cell" not in tags:
            cell.metadata["tags"] = tags + ["remove-cell"]
        elif cell.cell_type == "code" and not {"injected-parameters", "hide-input", "remove-input"} & set(tags):
            cell.metadata["tags"] = tags + ["hide-input"]     # the page reads as prose, tables, figures
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if "application/vnd.jupyter.widget-view+json" not in o.get("data", {})]
    _make_relative(nb)        # stamps kept before relativize existed still hold absolute paths
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
                                    "stamps": str(stamps.stamps_dir(staged))}, progress_bar=False,
                        log_output=False)
    tidy_executed(partial, output_path=staged / FRONT)
    os.replace(partial, staged / FRONT)
