"""``python -m textglauber.build``: see :mod:`textglauber.build.cli`."""
import sys

from .cli import main

sys.exit(main())
