# onnxc developer entry points. `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV := .cache/venv
SUITE := .cache/onnx-suite
CARGO ?= cargo

.PHONY: all build venv suite test test-checked unit conformance conformance-full bench fuzz clean-suite

all: build

build:
	$(CARGO) build --release --workspace

$(VENV)/.stamp: tests/conformance/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/conformance/requirements.txt
	touch $@

venv: $(VENV)/.stamp

# The ONNX backend test suite of the pinned onnx package, written to disk once.
$(SUITE)/cases.tsv: $(VENV)/.stamp tests/conformance/gen_suite.py tests/conformance/onnxc_cases.py tests/conformance/contrib_cases.py tests/conformance/contrib_reference.py tests/conformance/ml_cases.py
	$(VENV)/bin/python tests/conformance/gen_suite.py --out $(SUITE)

suite: $(SUITE)/cases.tsv

# Unit and integration tests, then every case of the conformance manifest at -O2 (each run
# sequentially and on 2, 3 and 4 threads of the runtime's pool, the threaded outputs compared
# bit for bit with the sequential ones), again with every model's leading input dims made
# symbolic (a run-time batch: each model must pass or be refused, never differ), again with
# one of each model's input dims taken at run time (same rule) and, built
# with checks on (test-checked), at -O0. The runtime's AVX2+FMA and portable kernels are also
# checked on AVX-512 machines by capping the instruction set (ONNXC_RUNTIME_ISA): unit tests,
# and the light models and conv/pool/onnxc cases.
test: build suite
	$(CARGO) test --release --workspace
	./target/release/conformance --check --manifest-only --opt O2 --threads 1,2,3,4
	./target/release/conformance --check --manifest-only --opt O2 --symbolic-batch
	./target/release/conformance --check --manifest-only --opt O2 --symbolic-seq
	$(MAKE) test-checked
	ONNXC_RUNTIME_ISA=avx2 $(CARGO) test --release -p onnxc-runtime
	ONNXC_RUNTIME_ISA=baseline $(CARGO) test --release -p onnxc-runtime
	ONNXC_RUNTIME_ISA=avx2 ./target/release/conformance --check --manifest-only --opt O2 --filter light
	ONNXC_RUNTIME_ISA=avx2 ./target/release/conformance --check --manifest-only --opt O2 --filter conv
	ONNXC_RUNTIME_ISA=baseline ./target/release/conformance --check --manifest-only --opt O2 --filter conv
	ONNXC_RUNTIME_ISA=baseline ./target/release/conformance --check --manifest-only --opt O2 --filter pool
	ONNXC_RUNTIME_ISA=baseline ./target/release/conformance --check --manifest-only --opt O2 --filter onnxc

# The -O0 manifest through a compiler and runtime built with debug assertions, overflow
# checks and Cranelift's verifier (profile `checked` in Cargo.toml): an overflow, a failed
# assertion or invalid CLIF anywhere on the path fails the case.
test-checked: suite
	$(CARGO) build --profile checked -p onnxc-runtime
	$(CARGO) build --profile checked -p onnxc-tests --bin conformance
	./target/checked/conformance --check --manifest-only --opt O0

unit: build
	$(CARGO) test --release --workspace

# All 2033 cases (not only the manifest); writes .cache/conformance-O2.tsv.
conformance: build suite
	./target/release/conformance --check --opt O2

clean-suite:
	rm -rf $(SUITE)

# Differential fuzzing against onnxruntime (not part of `test`): FUZZ_CASES models per generator.
FUZZ_CASES ?= 100
# Then mutation fuzzing of hostile models (tests/fuzz/mutate_fuzz.py): 5·FUZZ_CASES mutated
# backend-suite models, compiled and some run; onnxc must never panic, crash or hang.
fuzz: build venv suite
	$(VENV)/bin/python tests/fuzz/diff_fuzz.py --cases $(FUZZ_CASES)
	$(VENV)/bin/python tests/fuzz/mutate_fuzz.py --cases $$(( 5 * $(FUZZ_CASES) ))
