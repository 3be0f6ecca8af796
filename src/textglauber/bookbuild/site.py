"""The site: Jupyter Book 1 renders the staged book, then the build checks what it made (a page
per chapter with a figure, nothing loaded from the network, every page in a browser)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from . import sitecheck


def browser_check(html_dir: Path) -> list[str]:
    """Every page in headless Chromium (:mod:`textglauber.bookbuild.sitecheck`), screenshots beside the site;
    skipped, with a line that says so, where no chromium program is installed."""
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
