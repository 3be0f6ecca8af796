"""Execute the chapters of a profile with papermill, then build the book with Jupyter Book 1.

    python -m textglauber.bookbuild --profile smoke                 # every chapter that changed, then the site
    python -m textglauber.bookbuild --profile smoke --force         # every chapter, changed or not
    python -m textglauber.bookbuild --profile smoke --chapter incompatibility   # this one, changed or not
    python -m textglauber.bookbuild --profile smoke --no-execute    # rebuild the site only

Layout (all build products, none tracked):

- ``_build/<profile>/``          staging copy of the book: _config.yml, _toc.yml, book/*.md and
                                 the executed notebooks (sources stay clean);
- ``_build/<profile>/_build/html`` the site;
- ``_build/<profile>/_build/stamps/`` a stamp and the executed notebook per finished chapter
                                 (:mod:`textglauber.bookbuild.stamps`);
- ``results/<profile>/<chapter>/`` parquet tables and manifest.json written by each chapter.

Chapters run in the order their data flows (a chapter after those whose results it ``reads``,
see :mod:`textglauber.profile`). A chapter whose inputs are unchanged since its last finished run,
and whose outputs are all still there, is skipped with a line that says so; one that changed, or
``--force``, or a chapter named with ``--chapter``, is executed again.

Every model a chapter that is to run names is resolved before anything runs, so a missing model
gives one clear message and no compute is spent; a chapter the plan only re-renders or skips loads
no model and is not checked, unless its re-render stops and it runs in full after all (it is
checked then, before it runs).

First of all the build prints its plan: each artifact and chapter it will build, resume, run or
skip, with the time each is expected to take here; while a chapter runs, a progress line with the
time left about every minute (:mod:`textglauber.bookbuild.plan`,
:mod:`textglauber.bookbuild.progress`).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .. import profile as P
from .. import scheduler
from ..paths import repo_root
from . import locks, plan, stamps
from .artifacts import artifacts_needed, build_artifacts
from .execute import execute_front, render, run_chapters, stage
from .preflight import preflight
from .site import browser_check, build_site, check_site


@locks.holding_locks              # the locks main takes go when it returns or raises (SIGTERM included)
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m textglauber.bookbuild", description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--chapter", action="append", help="execute only this chapter, changed or not (repeatable)")
    ap.add_argument("--force", action="store_true", help="execute the chapters even where nothing changed")
    ap.add_argument("--no-execute", action="store_true", help="build the site from what is staged")
    ap.add_argument("--no-book", action="store_true", help="execute chapters only")
    ap.add_argument("--build-dir", default=str(repo_root() / "_build"))
    ap.add_argument("--results", default=str(repo_root() / "results"))
    ap.add_argument("--max-hours", type=float, default=plan.MAX_HOURS,
                    help=f"refuse a chapter expected to take longer on the CPU (default {plan.MAX_HOURS:g})")
    ap.add_argument("--scheduler", default=None,
                    help="where the chapters' independent units run: serial (default), local:N, or tcp://HOST:PORT "
                         "(a running Dask scheduler); the chapters read it from $" + scheduler.ENV)
    a = ap.parse_args(argv)
    try:                                          # a malformed or unreachable scheduler: one line, before anything
        os.environ[scheduler.ENV] = scheduler.check_reachable(a.scheduler)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
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
    locks.check_writable(locks.written_folders(staging, results_root, a.profile, [] if a.no_execute else chapters))
    locks.lock_build(locks.lock_paths(staging, results_root, a.profile), f"profile {a.profile!r}")  # until main ends
    staged = stage(a.profile, Path(a.build_dir))
    if a.no_execute:                   # pages from the notebooks the chapters last executed
        for ch in chapters:
            if stamps.executed_notebook(staged, ch).is_file():
                render(staged, ch, spec["chapters"][ch]["notebook"])
    else:
        lines = plan.announce(a.profile, spec, chapters, staged, Path(a.results).resolve(),   # what runs, and for how long
                              "--force" if a.force else "named with --chapter" if a.chapter else None)
        refused = plan.too_long(a.profile, spec, lines, a.max_hours)
        if refused:
            raise SystemExit(refused)
        build_artifacts(artifacts_needed(spec, chapters), Path(a.results).resolve())
        computing = plan.computing(lines, chapters)
        preflight(a.profile, computing)          # a chapter only re-rendered or skipped loads no model
        forced = "--force" if a.force else "named with --chapter" if a.chapter else None
        run_chapters(a.profile, spec, chapters, staged, Path(a.results).resolve(), forced, plan.PROBED.get(a.profile),
                     checked=set(computing))
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
