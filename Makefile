# The two commands: `make demo` and `make test`. Each sets up what it needs
# (virtual environment, dependencies, the C++ extension) and is quick when
# nothing changed.
VENV      := .venv
PY        := $(VENV)/bin/python
DEPS      := $(VENV)/.deps-stamp
EXT       := build/.ext-stamp
CSRC      := $(shell find csrc -name '*.cpp' -o -name '*.h')
# Expanded when the recipe runs: the deps rule may have just installed ccache
# (a value fixed at parse time would change the compile command between the
# first and the next build, and ninja would recompile everything once).
CCACHE    = $(wildcard /usr/lib/ccache/g++)

.PHONY: demo test build bench opinfo zoo clean

demo: $(EXT)
	$(PY) examples/train_demo.py

# The suite runs twice: in Strict Eager (the default) and in Fused Eager.
# Each pass spreads whole test files over TEST_WORKERS processes (each owns
# its own virtual device and compile cache); TEST_WORKERS=0 runs in-process.
TEST_WORKERS ?= 2
PYTEST    := $(PY) -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)
test: $(EXT)
	$(PYTEST) tests
	TPU_DEFER_AND_FUSE=1 $(PYTEST) tests

build: $(EXT)

BENCH_DEPS := $(VENV)/.bench-deps-stamp

# issue14.py runs eager_overhead.py, compile.py (small GPT and GPT-2
# shape; each configuration in a fresh process, 3 rounds: 10-30 minutes
# here) and fused_generate.py (a cold 64-token generate, Strict and Fused:
# 5-10 minutes here) and ends with one table of every ratio of issue 14 and
# its goal.
bench: $(EXT) $(BENCH_DEPS)
	$(PY) benchmarks/eager_modes.py
	$(PY) benchmarks/issue14.py

# torchax without its dependencies: it must not move the pinned jax/jaxlib.
$(BENCH_DEPS): benchmarks/requirements.txt $(DEPS)
	$(PY) -m pip install -q --no-deps -r benchmarks/requirements.txt
	touch $@

# PyTorch's OpInfo suite on tpu vs CPU -> docs/opinfo.md (about an hour here).
opinfo: $(EXT)
	$(PY) tools/opinfo_report.py --modules

# Every Transformers architecture, tiny random weights, tpu vs CPU -> docs/zoo.md
# (hours here; resumable: results are cached in docs/zoo.json, a rerun continues).
# ZOO_ARGS narrows it, e.g. ZOO_ARGS="--family MODEL_FOR_CAUSAL_LM --limit 20".
zoo: $(EXT)
	$(PY) tools/zoo.py $(ZOO_ARGS)

$(DEPS): requirements.txt pyproject.toml
	@command -v ccache >/dev/null 2>&1 || (apt-get install -y -q ccache >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q ccache >/dev/null 2>&1) || echo "ccache not available; building without it")
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	# Registers the package (and its torch.backends entry point) in place;
	# the extension itself is built by the rule below.
	TORCH_TPU_SKIP_EXT=1 $(PY) -m pip install -q --no-build-isolation --no-deps -e .
	touch $@

$(EXT): $(DEPS) $(CSRC) setup.py
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 MAX_JOBS=2 $(if $(CCACHE),CXX=$(CCACHE),) $(PY) setup.py -q build_ext --inplace
	@mkdir -p build && touch $@

clean:
	rm -rf build torch_tpu/_C*.so
