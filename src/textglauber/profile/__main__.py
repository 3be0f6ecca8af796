"""``python -m textglauber.profile PROFILE CHAPTER``: a chapter's papermill parameters as YAML
(:func:`textglauber.profile.loader.main`)."""
import sys

from .loader import main

sys.exit(main())
