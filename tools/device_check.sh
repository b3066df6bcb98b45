#!/usr/bin/env bash
# torch_tpu on an accelerator machine (a GPU through jax's PJRT plugin, or a
# TPU), in one bounded run: build the extension against that machine's own
# torch and jax, the smoke checks (tools/device_smoke.py), the test files
# most likely to differ from XLA:CPU (numerics, RNG, memory, donation,
# streams, compile), and the benchmarks against jax and PyTorch's own GPU
# path. Each step has its own time limit and log under $OUT (default
# /tmp/device_check); a failed step does not stop the next, except the build.
#
#   bash tools/device_check.sh            # every step
#   STEPS="build smoke" bash tools/device_check.sh
#
# The `device` tool's machines have no network: the machine's python3 must
# already hold torch, jax (with its GPU plugin), numpy, pytest, pytest-xdist.
#
# Building here for that machine (its image: Python 3.12, torch 2.11, jax
# 0.11.2), which also tests those versions on CPU before any device time:
#   $(ls -d ~/.pyenv/versions/3.12*/bin/python3.12) -m venv /tmp/j11
#   /tmp/j11/bin/pip install torch==2.11.0 jax==0.11.2 jaxlib==0.11.2 numpy ml_dtypes pytest \
#       pytest-xdist expecttest ninja "setuptools<82"
#   git worktree add --detach /work/wt-gpu HEAD && cd /work/wt-gpu && \
#       TORCH_DEVICE_BACKEND_AUTOLOAD=0 MAX_JOBS=2 /tmp/j11/bin/python setup.py -q build_ext --inplace
#   strip --strip-debug -o <repo>/.devtmp/_C.cpython-312-x86_64-linux-gnu.so torch_tpu/_C.cpython-312-*.so
# (.devtmp listed in .git/info/exclude), then `run` with carry [".devtmp"], a
# command that copies the .so into torch_tpu/ first, and STEPS without build.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device_check}
mkdir -p "$OUT"
PY=${PY:-python3}
STEPS=${STEPS:-"env build smoke tests bench"}
JOBS=${JOBS:-$(nproc)}
# Several test workers share one GPU: no worker may take most of its memory
# up front (jax preallocates 75% by default).
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1

step() { echo; echo "=== $1 ($(date -u +%H:%M:%S))"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }

if has env; then
  step env
  { nvidia-smi -L 2>/dev/null; nproc; g++ --version | head -1
    $PY -c "import sys, torch, jax; print(sys.version.split()[0], 'torch', torch.__version__, 'jax', jax.__version__, jax.devices())"
  } 2>&1 | tee "$OUT/env.log"
fi

if has build; then
  step build
  start=$(date +%s)
  # The H200 image's default compiler (/opt/gcc/bin/g++) built an extension
  # that segfaulted at its first program (2026-12-04), while one built
  # elsewhere with Debian's g++ 12 against the same torch 2.11 headers ran
  # every check: build with the system's g++ (not yet verified there), or
  # build elsewhere against the machine's torch and carry the .so
  # (STEPS without build).
  if ! timeout "${BUILD_LIMIT:-300}" env TORCH_DEVICE_BACKEND_AUTOLOAD=0 MAX_JOBS="$JOBS" CXX="${CXX_BUILD:-/usr/bin/g++}" \
      $PY setup.py -q build_ext --inplace >"$OUT/build.log" 2>&1; then
    # Every file's errors, not only the first batch's.
    (cd build/temp.*/ 2>/dev/null && timeout 300 ninja -k 0 -j "$JOBS" >>"$OUT/build.log" 2>&1)
    grep -E "error|Error" "$OUT/build.log" | grep -v "^ninja: build stopped" | head -60
    echo "build FAILED after $(( $(date +%s) - start )) s (log: build.log)"
    exit 1
  fi
  # The torch.backends entry point (autoload), as `make` registers it.
  TORCH_TPU_SKIP_EXT=1 $PY -m pip install -q --no-build-isolation --no-deps -e . >>"$OUT/build.log" 2>&1 \
    || echo "(entry point not registered: tests import torch_tpu themselves)"
  echo "built in $(( $(date +%s) - start )) s"
fi

if has smoke; then
  step smoke
  timeout "${SMOKE_LIMIT:-180}" $PY tools/device_smoke.py 2>&1 | tee "$OUT/smoke.log"
fi

if has tests; then
  step tests
  # Ordered so that the files most likely to differ off XLA:CPU start first.
  # (test_opinfo_slice/test_moduleinfo_slice need expecttest, which the H200
  # image lacks: carry its wheel.)
  files=${TEST_FILES:-"tests/test_precision.py tests/test_rng_state.py tests/test_donation.py tests/test_memory.py
    tests/test_streams.py tests/test_device.py tests/test_models.py tests/test_opinfo_slice.py tests/test_amp.py
    tests/test_train_bf16.py tests/test_optim.py tests/test_torch_compile.py tests/test_storage.py
    tests/test_persistent_cache.py tests/test_eager_modes.py tests/test_moduleinfo_slice.py"}
  # SIGINT: pytest stops and still prints its summary of what ran.
  timeout -s INT -k 20 "${TEST_LIMIT:-240}" $PY -m pytest -q -p no:cacheprovider -rfE -n "${TEST_WORKERS:-8}" \
    --dist loadfile $files >"$OUT/tests.log" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed|error" "$OUT/tests.log" | tail -60
fi

if has bench; then
  step bench
  timeout "${BENCH_LIMIT:-120}" $PY benchmarks/eager_overhead.py --iters 1000 2>&1 | tee "$OUT/bench_eager.log"
  timeout "${PROFILE_LIMIT:-90}" $PY benchmarks/compiled_step_profile.py 2>&1 | tee "$OUT/bench_profile.log"
  kinds=${BENCH_KINDS:-compiled,strict,fused}
  $PY -c "import torch; assert torch.cuda.is_available()" 2>/dev/null && kinds=${BENCH_KINDS:-compiled,cuda,strict,inductor_cuda}
  timeout "${COMPILE_LIMIT:-200}" $PY benchmarks/compile.py --model small --jax-platform "" --kinds "$kinds" \
    --repeats 1 --steps 5 --warmup 2 --timeout 150 2>&1 | tee "$OUT/bench_compile.log"
fi
step done
