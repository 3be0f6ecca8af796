"""Every count is priced or capped (issue 65, item 2): each integer a shipped profile gives a chapter
either enters the chapter's work estimate (the plan's price, which the 24-hour refusal reads) or
has a ceiling in the schema. The walk covers every integer at any depth of every chapter's
parameters, so a count added later without either fails here.

Priced: doubling the value (plus one) raises :func:`chapter_work`. Capped: the schema refuses
:data:`BIG`. Seeds (bounded by their type) and lengths in content tokens (bounded by each model's
input length, which the pre-flight checks before anything loads) are neither counts of work
nor free: they are listed apart."""
import copy

import pytest

from textglauber import profile as P
from textglauber.bookbuild.estimates.work import chapter_work
from textglauber.profile.values import CONTENT_LENGTH

BIG = 2 * 10**8
SHIPPED = ("smoke", "offline", "paper", "standin")


def leaves(value, path=()):
    """Paths of every integer (not bool) inside ``value``."""
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield path
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, path + (i,))


def replaced(prm: dict, path: tuple, f) -> dict:
    out = copy.deepcopy(prm)
    holder = out
    for k in path[:-1]:
        holder = holder[k]
    holder[path[-1]] = f(holder[path[-1]])
    return out


def field_of(model, path: tuple):
    """The pydantic field a path's first keys name (through nested models), or None."""
    field = None
    for k in path:
        if isinstance(k, int) or model is None or k not in getattr(model, "model_fields", {}):
            break
        field = model.model_fields[k]
        model = field.annotation if isinstance(field.annotation, type) else None
    return field


def exempt(model, path: tuple) -> bool:
    names = [k for k in path if isinstance(k, str)]
    if names and names[-1].endswith("seed"):
        return True
    field = field_of(model, path)
    return field is not None and CONTENT_LENGTH in field.metadata


def priced(chapter: str, prm: dict, path: tuple) -> bool:
    base = chapter_work(chapter, prm)
    try:
        more = chapter_work(chapter, replaced(prm, path, lambda v: 2 * v + 1))
    except (KeyError, TypeError, ValueError, IndexError, OverflowError):
        return False
    return base is not None and more is not None and more > base * (1 + 1e-9)


def capped(model, prm: dict, path: tuple) -> bool:
    return bool(P.problems(model, replaced(prm, path, lambda v: BIG), ""))


def free_counts(profile: str) -> list[str]:
    spec = P.load_profile(profile)
    out = []
    for chapter, entry in spec["chapters"].items():
        model = P.CHAPTERS[entry["notebook"]]
        prm = {k: v for k, v in P.chapter_parameters(profile, chapter, spec=spec).items() if k in model.model_fields}
        for path in leaves(prm):
            if not exempt(model, path) and not priced(chapter, prm, path) and not capped(model, prm, path):
                out.append(f"{chapter}: " + ".".join(str(k) for k in path))
    return out


@pytest.mark.parametrize("profile", SHIPPED)
def test_every_count_a_profile_gives_is_priced_or_capped(profile):
    assert free_counts(profile) == []


def test_the_walk_finds_a_count_that_is_neither(monkeypatch):
    """The walk can fail: with the ceiling taken off ``power_replicates`` (which the work estimate
    does not price: the design check's fits are not encoder rows), it is named."""
    from textglauber.profile import chapters
    from textglauber.profile.values import Int

    loose = chapters.Crossover.__class__("LooseCrossover", (chapters.Crossover,), {
        "__annotations__": {"power_replicates": Int(ge=1)}, "__module__": __name__})
    monkeypatch.setitem(P.CHAPTERS, "book/03_crossover.ipynb", loose)
    assert free_counts("smoke") == ["crossover: power_replicates"]


@pytest.mark.parametrize("key, value", [("power_replicates", 100_000_000)])
def test_the_probes_counts_are_refused_in_one_line(key, value):
    nb = "book/03_crossover.ipynb"
    prm = {**P.notebook_parameters(P.params_dir().parent / nb), key: value}
    with pytest.raises(P.ProfileError) as exc:
        P.check_chapter(nb, prm)
    assert str(exc.value).startswith(f"{nb}: {key} = {value}: must be an integer in [1, 1000]")
