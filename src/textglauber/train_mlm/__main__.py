"""``python -m textglauber.train_mlm``: see :mod:`textglauber.train_mlm.cli`."""
from .cli import main

raise SystemExit(main())
