"""The book's build: ``python -m textglauber.bookbuild --profile NAME`` (``./run_all.sh`` runs it).

In order:

1. :mod:`~textglauber.bookbuild.cli` checks the profile, probes every folder it will write and takes
   the profile's locks (:mod:`~textglauber.bookbuild.locks`), and stages a copy of the book
   (:func:`~textglauber.bookbuild.execute.stage`);
2. prints the plan, what runs and for how long (:mod:`~textglauber.bookbuild.plan`, with the time
   estimates of :mod:`~textglauber.bookbuild.estimates`);
3. builds the artifacts its chapters read (:mod:`~textglauber.bookbuild.artifacts`: stand-ins,
   benchmark, trained models), then resolves every model and corpus (:mod:`~textglauber.bookbuild.preflight`);
4. executes each chapter whose inputs changed, in data order, and stamps it
   (:mod:`~textglauber.bookbuild.execute`, :mod:`~textglauber.bookbuild.stamps`), with progress lines
   while it runs (:mod:`~textglauber.bookbuild.progress`); a chapter whose page modules alone changed
   is re-rendered from its last full run instead (:mod:`~textglauber.bookbuild.replay`); then the
   findings page (:mod:`~textglauber.bookbuild.findings`);
5. renders the site with Jupyter Book (:mod:`~textglauber.bookbuild.sphinx_site` is its Sphinx
   extension) and checks it, in a browser too (:mod:`~textglauber.bookbuild.site`,
   :mod:`~textglauber.bookbuild.sitecheck`).

:mod:`~textglauber.bookbuild.compare` compares two results folders, e.g. of two builds.

Nothing is imported here: a module of the build is imported by its own name
(``from textglauber.bookbuild import stamps``).
"""
