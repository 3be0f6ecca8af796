"""The prepared GPU session (``data/gpu/session.sh``) asks the benchmark only for what it accepts,
for the cells issue 54 needs, within one device call: checked here at no GPU time, by reading the
script's steps with the GPU branch's values and parsing each with the benchmark's own parser."""
import re
import shlex

from textglauber.bench.__main__ import _parser
from textglauber.bench.throughput import SHAPES
from textglauber.paths import repo_root

SCRIPT = repo_root() / "data" / "gpu" / "session.sh"


def _steps(branch: int) -> list[tuple[str, int, list[str]]]:
    """(name, seconds, bench arguments) of each step, with the variables of the script's
    ``branch`` (0: SMALL, 1: the GPU) filled in as bash would split them."""
    text = SCRIPT.read_text()
    assignments = re.findall(r"^\s+(base=.*)$", text, flags=re.M)[branch]
    values = dict(re.findall(r'(\w+)=("[^"]*"|[^;\s]+)', assignments))
    values = {k: v.strip('"') for k, v in values.items()}
    fixed = re.search(r'--device "\$DEVICE" (.*?) "\$@"', text).group(1).split()
    steps = []
    for name, limit, rest in re.findall(r"^step (\S+) (\d+) (.*)$", text, flags=re.M):
        words = shlex.split(re.sub(r"\$(\w+)", lambda m: values[m.group(1)], rest))
        steps.append((name, int(limit), ["--device", "cuda", *fixed, *words]))
    return steps


def test_the_gpu_steps_parse_and_ask_for_the_target_cells_within_one_call():
    steps = _steps(1)
    assert sum(limit for _, limit, _ in steps) <= 8 * 60              # the one call of at most 8 minutes
    parsed = {name: _parser().parse_args(args) for name, _, args in steps}
    for a in parsed.values():
        assert set(a.models) <= set(SHAPES) and a.dtype in ("bfloat16", "float32") and 1 <= a.loop_chains <= 64
    first = parsed[steps[0][0]]                                        # the target's cells come first
    assert (first.models, first.dtype, first.lengths) == (["bert-base"], "bfloat16", [128])
    assert min(first.batches) >= 512
    assert any(a.models == ["bert-large"] for a in parsed.values())
    assert {(a.dtype, n) for a in parsed.values() for n in a.lengths} >= {("float32", 128), ("bfloat16", 20)}


def test_the_small_branch_runs_the_same_steps_on_the_tiny_model_in_float32():
    gpu, small = _steps(1), _steps(0)
    assert [s[0] for s in small] == [s[0] for s in gpu]
    for _, _, args in small:
        a = _parser().parse_args(args)
        assert a.models == ["tiny-mlm"] and a.dtype == "float32"

