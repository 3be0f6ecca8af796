"""The strict profile reader (issue 65, item 1): an alias bomb, a key given twice and an oversized
file are each refused in one line naming the file, before anything is built, and a bomb in another
profile's file is named and left out of the cost appendix's table without slowing it.

Each case fails on the reader this replaced (``yaml.safe_load``): it expanded aliases, kept the
last of two equal keys, read a file of any size, and built the whole value before cutting an error
message to 80 characters."""
import time
from pathlib import Path

import pytest

from textglauber.bench import read as bench_read
from textglauber.bookbuild import cli
from textglauber.profile import ProfileError, errors, load_profile, strict

ROOT = Path(__file__).resolve().parents[2]


def bomb(levels: int = 10, width: int = 9) -> str:
    """A YAML 'billion laughs': ``levels`` anchors, each a list of ``width`` aliases of the one before."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + f"\nseed: *a{levels - 1}\n"


def smoke_text() -> str:
    return (ROOT / "params" / "smoke.yaml").read_text()


def test_an_alias_bomb_is_refused_in_one_line_naming_the_file_and_the_line(pdir):
    (pdir / "bomb.yaml").write_text(smoke_text() + bomb())
    with pytest.raises(ProfileError) as exc:
        load_profile("bomb")
    line = str(exc.value)
    assert "\n" not in line and "bomb.yaml" in line and "anchor 'a0'" in line and "line" in line


def test_one_alias_is_refused_too_a_profile_writes_each_value_out(pdir):
    text = smoke_text().replace("seed: 0", "seed: &s 0", 1)
    assert text != smoke_text()
    (pdir / "anchored.yaml").write_text(text)
    with pytest.raises(ProfileError, match="anchors and aliases are not allowed"):
        load_profile("anchored")


def test_a_key_given_twice_is_refused_naming_the_key_and_both_lines(pdir):
    text = smoke_text()
    lines = text.splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("defaults:"))
    lines.insert(at + 1, "  seed: 7")
    lines.insert(at + 1, "  seed: 0")
    (pdir / "twice.yaml").write_text("\n".join(lines) + "\n")
    with pytest.raises(ProfileError) as exc:
        load_profile("twice")
    msg = str(exc.value)
    assert "\n" not in msg and "twice.yaml" in msg
    assert f"key 'seed' is given twice, at line {at + 2} and at line {at + 3}" in msg


def test_equal_keys_in_different_mappings_are_fine(pdir):
    """'seed' under defaults and under a chapter's parameters are two mappings: not a duplicate."""
    assert load_profile("smoke")["chapters"]


def test_a_file_past_the_size_limit_is_refused_before_it_is_parsed(pdir):
    (pdir / "huge.yaml").write_text(smoke_text() + "#" * (strict.MAX_BYTES + 1) + "\n")
    with pytest.raises(ProfileError, match=f"a profile file is at most {strict.MAX_BYTES} bytes"):
        load_profile("huge")


def test_a_bomb_on_the_command_line_exits_2_fast_with_one_line(pdir, capsys, tmp_path):
    (pdir / "bomb.yaml").write_text(smoke_text() + bomb())
    t = time.process_time()
    with pytest.raises(SystemExit) as exc:
        cli.main(["--profile", "bomb", "--build-dir", str(tmp_path / "b"), "--results", str(tmp_path / "r")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bomb.yaml" in err[0] and "Traceback" not in err[0]
    assert process_seconds_below(t, 5.0)
    assert not (tmp_path / "r").exists()


def process_seconds_below(t0: float, limit: float) -> bool:
    """A ceiling far above the refusal's cost (milliseconds) and far below the bomb's expansion
    (9^10 values: hours); CPU time of this process, so the host's load does not move it."""
    return time.process_time() - t0 < limit


def test_another_profiles_bomb_is_named_and_left_out_of_the_cost_table(pdir):
    (pdir / "bomb.yaml").write_text(smoke_text() + bomb())
    t = time.process_time()
    work, broken = bench_read.workloads(["smoke", "bomb"])
    assert process_seconds_below(t, 60.0)
    assert set(work.profile) == {"smoke"}
    assert len(broken) == 1 and broken[0].startswith("params/bomb.yaml is left out") and "\n" not in broken[0]


def test_a_profile_that_loads_but_fails_its_schema_is_left_out_of_the_cost_table(pdir):
    (pdir / "badseed.yaml").write_text(smoke_text().replace("seed: 0", "seed: -3", 1))
    work, broken = bench_read.workloads(["smoke", "badseed"])
    assert set(work.profile) == {"smoke"}
    assert len(broken) == 1 and "badseed.yaml" in broken[0]


def test_show_builds_no_more_than_it_prints():
    """A value shared 9^12 times over shows in its first 80 characters without being expanded."""
    x = [1] * 9
    for _ in range(12):
        x = [x] * 9
    t = time.process_time()
    text = errors.show(x)
    assert process_seconds_below(t, 1.0)
    assert len(text) == 80 and text.endswith("...") and text.startswith("[[[[[[[[[[[[[1, 1")
    assert errors.show({"a": [1, 2.5, "x"], "b": None, "c": True}) == "{a: [1, 2.5, 'x'], b: null, c: true}"
