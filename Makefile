# agentfsm: the two set-up commands are `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Slimmer llama.cpp build (DESIGN.md): same model loading and grammar support, ~30% faster to compile.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install test demo diagrams bench lint clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@echo "Installing agentfsm with its test and local-model extras (llama-cpp-python compiles once, ~7 min on 2 cores; pip caches it)..."
	$(PY) -m pip install -e '.[local,test,mcp,eval,ray]'
	@echo "Installing the BFCL data and checker without their heavy dependencies..."
	$(PY) -m pip install --no-deps 'bfcl-eval==2026.3.23'
	touch $@

install: $(VENV)/.installed

test: install
	$(PY) -m pytest -q
	$(PY) -m mypy --strict agentfsm

demo: install
	$(VENV)/bin/agentfsm run --tools agentfsm.examples.calculator:TOOLS \
		"First calculate 12.5 * 4. Then convert the result from km to mi." \
		--transcript runs/demo.jsonl

diagrams: install
	$(PY) -m agentfsm diagram -o diagrams/agent.md
	$(PY) -m agentfsm diagram fixtures/transcripts -o diagrams/observed.md

bench: install
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache
