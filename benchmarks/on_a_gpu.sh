#!/usr/bin/env bash
# Every GPU check of this project, prepared so that a lent GPU's few minutes bring back every
# figure: run from the repository root on the GPU machine, one part or several per call.
#
#   bash benchmarks/on_a_gpu.sh tests packing   # the CUDA tests (1-2 min), packing on one GPU
#   bash benchmarks/on_a_gpu.sh peers           # python -m benchmarks.peers --device cuda (about 5 min)
#   bash benchmarks/on_a_gpu.sh breakdown       # where each side's step goes, 1b 32K and documents (2-3 min)
#   bash benchmarks/on_a_gpu.sh moe             # the experts' grouped matmuls against the loop, bf16 (1 min)
#   DEADLINE=585 PACKING_S=160 PEERS_S=300 ROUNDS=2 BUDGET=200 \
#       bash benchmarks/on_a_gpu.sh packing peers tests   # all in one 10-minute call
# Issue 41's next lease, in this order (each call while the machine is still warm):
#   DEADLINE=580 TESTS_S=180 ROWS="1x32768 refinedweb" BUDGET=380 \
#       bash benchmarks/on_a_gpu.sh tests peers   # the open rows against both peers, the compiled one as time allows
#   DEADLINE=420 SIDES="engine transformers_compiled" ROWS="16x1024 8x2048 2x8192 4x2048 1x8192" BUDGET=380 \
#       bash benchmarks/on_a_gpu.sh peers   # the compiled peer on every other row
#   DEADLINE=200 BREAKDOWN_S=200 bash benchmarks/on_a_gpu.sh breakdown   # where the time goes, if time is left
#
# TESTS_S, PACKING_S, PEERS_S and BREAKDOWN_S replace a part's limit; ROUNDS and BUDGETS are
# packing's --rounds (default 3) and --budgets, BUDGET peers' --budget, SIDES its --sides, ROWS
# its --rows and BREAKDOWN_ROWS breakdown's (each script's own default rows when unset).
# DEADLINE (seconds from the start) caps every part's limit so that the whole ends by then; the
# benchmarks print each figure to their .err file as they measure it, so a part cut off at its
# limit still brings back what it measured.
#
# It installs the project without its dependencies into the machine's own Python (whose CUDA
# build of torch it keeps), bounds each part with a timeout, and writes what each printed, with
# the device's name, under $OUT (else ./gpu-results): device.txt, cuda_tests.txt, peers.json and
# peers.err, packing.json and packing.err, breakdown.json and breakdown.err. A part that fails
# or times out says so and the next part still runs.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-results}
py=${PYTHON:-python3}
mkdir -p "$out"
if ! "$py" -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.txt" 2>&1; then
    # an older setuptools than the build asks for: the hotswitch namespace as links on the path
    mkdir -p .gpu-path/hotswitch
    for package in backend kernel widgets; do ln -sfn "$PWD/$package" ".gpu-path/hotswitch/$package"; done
    export PYTHONPATH="$PWD/.gpu-path${PYTHONPATH:+:$PYTHONPATH}"
    echo "pip could not install the project (see $out/install.txt): using links on PYTHONPATH"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$out/device.txt" 2>&1
"$py" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))' >>"$out/device.txt" 2>&1
cat "$out/device.txt"

exec 3>&1  # how a part ended goes to the script's output, not to the part's files
part() {  # part NAME SECONDS COMMAND...: run it bounded, say how it ended
    local name=$1 limit=$2
    shift 2
    local own="${name^^}_S"
    limit=${!own:-$limit}
    if [ -n "${DEADLINE:-}" ] && [ $((DEADLINE - SECONDS)) -lt "$limit" ]; then limit=$((DEADLINE - SECONDS)); fi
    if [ "$limit" -le 10 ]; then
        echo "[$name] not run: the deadline leaves $limit s" >&3
        return
    fi
    local started=$SECONDS
    timeout "$limit" "$@"
    echo "[$name] exit $? after $((SECONDS - started)) s (limit $limit s)" >&3
}

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(tests packing peers)
for what in "${parts[@]}"; do
    case $what in
    tests)
        part tests 240 "$py" -m pytest -q -n 0 -p no:cacheprovider -rs \
            tests/backend/models/attention/test_kernels.py tests/backend/graph/test_compiled_regions.py \
            tests/backend/models/test_chunked_loss.py \
            "tests/backend/train/state/test_fused_update.py::test_one_kernel_equals_the_eager_clip_and_adamw_and_writes_the_compute_copy[cuda]" \
            tests/backend/parallel/test_attention_blocks.py tests/backend/runtime/test_devices.py \
            "tests/backend/runtime/test_on_read.py::test_a_host_tensor_reaches_the_device_whole[cuda]" \
            tests/backend/train/loop/test_no_stops.py \
            --deselect "tests/backend/graph/test_compiled_regions.py::test_a_compiled_graph_computes_what_the_eager_one_does" \
            >"$out/cuda_tests.txt" 2>&1  # deselected: a CPU compile (70 s there) that CI runs
        tail -5 "$out/cuda_tests.txt"
        ;;
    packing)
        part packing 200 "$py" -m benchmarks.packing --device cuda --ranks 1 --plan dp1 --model 1b \
            --precision bf16 --rounds "${ROUNDS:-3}" ${BUDGETS:+--budgets $BUDGETS} --json >"$out/packing.json" 2>"$out/packing.err"
        ;;
    peers)
        part peers 480 "$py" -m benchmarks.peers --device cuda ${BUDGET:+--budget "$BUDGET"} ${ROWS:+--rows $ROWS} ${SIDES:+--sides $SIDES} --json >"$out/peers.json" 2>"$out/peers.err"
        tail -3 "$out/peers.err"
        ;;
    breakdown)
        part breakdown 180 "$py" -m benchmarks.breakdown --device cuda ${BREAKDOWN_ROWS:+--rows $BREAKDOWN_ROWS} --json >"$out/breakdown.json" 2>"$out/breakdown.err"
        grep '^\[breakdown\].*by kind' "$out/breakdown.err"
        ;;
    moe)
        part moe 120 "$py" -m benchmarks.moe --device cuda --dtype bf16 --dim 2048 --ffn-dim 768 --per-token 8 \
            --tokens 8192 --experts 64 128 --json >"$out/moe.json" 2>"$out/moe.err"
        tail -2 "$out/moe.err"
        ;;
    *)
        echo "unknown part '$what': give tests, packing, peers, breakdown or moe"
        exit 2
        ;;
    esac
done
