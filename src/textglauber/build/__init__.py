"""The book's build: ``python -m textglauber.build --profile NAME`` (``./run_all.sh`` runs it).

In order:

1. :mod:`~textglauber.build.cli` checks the profile, probes every folder it will write and takes
   the profile's locks (:mod:`~textglauber.build.locks`), and stages a copy of the book
   (:func:`~textglauber.build.execute.stage`);
2. prints the plan, what runs and for how long (:mod:`~textglauber.build.plan`, with the time
   estimates of :mod:`~textglauber.build.estimates`);
3. builds the artifacts its chapters read (:mod:`~textglauber.build.artifacts`: stand-ins,
   benchmark, trained models), then resolves every model and corpus (:mod:`~textglauber.build.preflight`);
4. executes each chapter whose inputs changed, in data order, and stamps it
   (:mod:`~textglauber.build.execute`, :mod:`~textglauber.build.stamps`), with progress lines
   while it runs (:mod:`~textglauber.build.progress`); then the findings page
   (:mod:`~textglauber.build.findings`);
5. renders the site with Jupyter Book (:mod:`~textglauber.build.sphinx_site` is its Sphinx
   extension) and checks it, in a browser too (:mod:`~textglauber.build.site`,
   :mod:`~textglauber.build.sitecheck`).

:mod:`~textglauber.build.compare` compares two results folders, e.g. of two builds.

Nothing is imported here: a module of the build is imported by its own name
(``from textglauber.build import stamps``).
"""
