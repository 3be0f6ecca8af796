"""``python -m textglauber.bookbuild``: see :mod:`textglauber.bookbuild.cli`. A file the build cannot
read or write (a full disk, a folder without permission) ends it in one line naming the file."""
import sys

from .cli import main

try:
    sys.exit(main())
except OSError as exc:
    where = exc.filename or "a file of the build"
    sys.exit(f"the build stopped: {where}: {exc.strerror or exc}; free space or fix the folder's permissions and "
             "build again (what finished is kept: each chapter's last complete results and stamp)")
