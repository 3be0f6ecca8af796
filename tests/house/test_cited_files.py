"""No module cites a document that the repository does not hold."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_cited_document_exists():
    cited = {}
    for f in (ROOT / "src").rglob("*.py"):
        for m in re.finditer(r"\b((?:docs|book)/[a-z0-9_./-]+\.(?:md|ipynb))", f.read_text(encoding="utf-8")):
            cited.setdefault(m.group(1), f.relative_to(ROOT))
    assert "docs/science.md" in cited
    missing = {p: str(f) for p, f in cited.items() if not (ROOT / p).is_file()}
    assert not missing
    assert not [f for f in (ROOT / "src").rglob("*.py") if "SPEC" in re.sub(r"SPECIALS|INSPECT", "", f.read_text())]
