#!/usr/bin/env bash
# Second GPU call of 2026-11-27: the parity step (header fix), the muon divergence diagnosis, JAX FLOPs (fix).
# DRY=1: a CPU rehearsal at tiny sizes.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:?}
PY=${PYTHON:-python3}
W=${WHEELS:-.gpu}
dry=(); dev=(); tiny=()
if [ "${DRY:-0}" = 1 ]; then dry=(--dry-run); dev=(--device cpu); tiny=(--set epochs=1 --set batch_size=50); fi
log() { echo "== $* ($(date +%s))" | tee -a $OUT/suite.log; }
log parity
timeout 150 bash benchmarks/gpu_suite.sh --offline --wheels $W "${dry[@]}" --results $OUT/a --airbench .gpu/airbench/airbench94.py \
    --steps parity --keep /tmp/k --budget 140 >>$OUT/suite.log 2>&1
$PY -c "import sys; sys.path.insert(0, 'benchmarks'); import gpu_wheels; from pathlib import Path; gpu_wheels.install(Path('$W'), Path('/tmp/site'))" >>$OUT/suite.log 2>&1
export PYTHONPATH=$PWD:/tmp/site
D=/tmp/k/data-cifar
common=(run cifar10 --recipe cifar10_muon --data-dir $D --allow-custom-data --no-download --full-schedule --target 0.9 -q "${dev[@]}" "${tiny[@]}")
for v in fp16=false muon=false normalize_weights=false head_unit_std=false; do
    log "muon $v"
    timeout 45 $PY -m daybreak "${common[@]}" --set $v --out /tmp/diag/m-$v >>$OUT/suite.log 2>&1; echo "muon $v rc=$?" | tee -a $OUT/suite.log
done
log "muon every step"
timeout 60 $PY -m daybreak "${common[@]}" --eval-every-steps 1 --out /tmp/diag/m-steps >>$OUT/suite.log 2>&1; echo "muon steps rc=$?" | tee -a $OUT/suite.log
log "airbench94_muon on the same data"
timeout 120 $PY benchmarks/airbench_parity.py --airbench .gpu/airbench/airbench94_muon.py --data-dir $D --repeats 1 \
    --compile off --out /tmp/diag/parity-muon "${dev[@]}" "${dry[@]}" >>$OUT/suite.log 2>&1; echo "parity muon rc=$?" | tee -a $OUT/suite.log
(cd /tmp/diag && tar czf $OUT/diag.tar.gz --exclude='*.pt' --exclude='*.safetensors' --exclude='checkpoint*' .)
log jax
timeout 100 bash benchmarks/gpu_suite.sh --offline --wheels $W "${dry[@]}" --results $OUT/b --steps throughput_jax_resnet50 --budget 95 >>$OUT/suite.log 2>&1
log done
