#!/usr/bin/env bash
# One GPU session of the engine's benchmark (issue 54), prepared and tried on a CPU first.
#
# On a lent GPU, from the repository root (the device tool sets $OUT; carry .whl for pydantic):
#   bash data/gpu/session.sh                       # about 7 minutes; the runs in order of need
# On a CPU, the same steps on the tiny model, one cell each, in a few minutes:
#   SMALL=1 DEVICE=cpu OUT=/tmp/s bash data/gpu/session.sh
#
# Each step is one `python -m textglauber.bench` call under its own `timeout`, so the whole script
# ends within the sum of the limits below (460 s) and a step cut short keeps the cells it finished
# (its .partial.csv). After every step, everything so far is packed into $OUT/session.tar.gz (the
# device tool brings back at most 8 files), beside $OUT/session.log. Unpack it into
# data/gpu/<machine>-<date>/ and write that folder's record.json from session.log.
set -u
DEVICE=${DEVICE:-cuda}
OUT=${OUT:?set OUT to the folder the results go to}
SMALL=${SMALL:-0}
work=$(mktemp -d)
mkdir -p "$OUT"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$work/session.log"; }

if [ -d .whl ] && ! python3 -c "import pydantic" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { log "the carried wheels did not install"; exit 1; }
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

{
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
    python3 -c "import sys, torch, transformers; print('python', sys.version.split()[0]); print('torch', torch.__version__, 'cuda', torch.version.cuda); print('transformers', transformers.__version__); print('tf32', torch.backends.cuda.matmul.allow_tf32); print('device', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none')"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
    nproc
} >"$work/machine.txt" 2>&1
log "machine: $(tr '\n' ';' <"$work/machine.txt")"

if [ "$SMALL" = 1 ]; then    # the tiny model for both shapes, one small cell a step, float32 (bf16 crawls on a CPU)
    base=tiny-mlm; large=tiny-mlm; n_long=6; n_short=4; big=4; mid=2; bf16=float32
else
    base=bert-base; large=bert-large; n_long=128; n_short="20 64"; big="512 1024"; mid="64 512"; bf16=bfloat16
fi

step() {                                  # step NAME SECONDS ARGS...: one bench call, then pack
    local name=$1 limit=$2
    shift 2
    log "start $name (limit $limit s): $*"
    timeout "$limit" python3 -m textglauber.bench --device "$DEVICE" --steps 8 --rounds 3 --loop-chains 16 "$@" \
        --out "$work/bench-$name.csv" >>"$work/session.log" 2>&1
    log "end $name: exit $? ($(ls "$work" | grep -c "^bench-$name") files)"
    tar -czf "$OUT/session.tar.gz" -C "$work" .
    cp "$work/session.log" "$OUT/session.log"
}

# 1. the target's cells: the BERT-base shape at n = 128, batch 512 and 1024, in bf16
step target-bf16 150 --dtype $bf16 --models $base --lengths $n_long --batches $big
# 2. the BERT-large shape at n = 128 in bf16
step large-bf16 110 --dtype $bf16 --models $large --lengths $n_long --batches $mid
# 3. the same target cells in float32 (TF32 off), the bound of its own dtype
step target-fp32 110 --dtype float32 --models $base --lengths $n_long --batches $big
# 4. the shorter lengths at the large batches in bf16
step short-bf16 90 --dtype $bf16 --models $base --lengths $n_short --batches $big
log "done"
cp "$work/session.log" "$OUT/session.log"
tar -czf "$OUT/session.tar.gz" -C "$work" .
