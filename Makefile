# agentfsm: the two set-up commands are `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Slimmer llama.cpp build (DESIGN.md): same model loading and grammar support, ~30% faster to compile.
# A portable x86-64 build (AVX2/FMA/F16C), not -march=native: on a machine whose CPU reports AMX,
# the native build's batched prompt evaluation crashed with a segmentation fault (seen here on
# Xeons with amx_int8/amx_tile under this VM's kernel), and CI may run on another CPU than the one
# that built a cached wheel.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
	-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install clients debs test demo quality quality-fast diagrams bench bench-peers peers lint clean

# pip's wheel cache is keyed by the source archive, not by CMAKE_ARGS: a wheel once built with
# other flags (a native AMX build) would be reused silently. So llama-cpp-python is built here,
# once, into a folder named by a hash of the flags, and installed from there.
LLAMA_CPP := $(shell grep -o 'llama-cpp-python==[0-9.]*' pyproject.toml)
LLAMA_WHEELS := $(HOME)/.cache/agentfsm/wheels/$(shell printf '%s' "$(LLAMA_CPP) $(CMAKE_ARGS)" | sha256sum | cut -c1-16)

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 || { \
		echo "Building $(LLAMA_CPP) once for these flags (~7 min on 2 cores) into $(LLAMA_WHEELS)..."; \
		$(PY) -m pip wheel -q --no-deps --no-cache-dir -w $(LLAMA_WHEELS).tmp '$(LLAMA_CPP)' && \
		rm -rf $(LLAMA_WHEELS) && mv $(LLAMA_WHEELS).tmp $(LLAMA_WHEELS); }
	$(PY) -m pip install --no-deps $(LLAMA_WHEELS)/llama_cpp_python-*.whl
	@echo "Installing agentfsm with its test and local-model extras..."
	$(PY) -m pip install -e '.[local,test,mcp,eval,ray,clients,otel]'
	@echo "Installing the BFCL data and checker without their heavy dependencies..."
	$(PY) -m pip install --no-deps 'bfcl-eval==2026.3.23'
	touch $@

install: $(VENV)/.installed

# The Node clients of the client suite (Claude Code, Codex CLI, the Vercel AI SDK), pinned
# by tests/clients/js/package-lock.json and installed with `npm ci` into .clients/.
CLIENTS_JS := tests/clients/js/package.json tests/clients/js/package-lock.json
.clients/.installed: $(CLIENTS_JS)
	mkdir -p .clients
	cp $(CLIENTS_JS) .clients/
	cd .clients && npm ci --no-audit --no-fund
	touch $@

clients: .clients/.installed

# Debian packages some tests drive for real: headless Chromium for the report's browser test
# (tests/test_report_browser.py; Playwright, test extra, drives /usr/bin/chromium; never
# `playwright install`) and graphviz's `dot` for SVG/PNG diagrams (tests/test_reviewer_inputs.py).
# Skipped when both are there; as root it installs directly, otherwise through sudo.
debs:
	@{ test -x /usr/bin/chromium && command -v dot >/dev/null; } || { \
		command -v apt-get >/dev/null || { echo "make debs: no apt-get; install Chromium at /usr/bin/chromium (or set AGENTFSM_CHROMIUM) and graphviz (dot on PATH)" >&2; exit 1; }; \
		SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
		echo "Installing Debian's chromium and graphviz for the browser and diagram tests..."; \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver graphviz; }

# the proxy tests of the three protocols once more, each proxy served by `agentfsm serve --workers 2`
WORKER_TESTS := tests/test_server_openai.py tests/test_server_anthropic.py tests/test_server_responses.py

test: install clients debs
	$(PY) -m pytest -q
	AGENTFSM_TEST_SERVE_WORKERS=2 $(PY) -m pytest -q $(WORKER_TESTS)
	$(MAKE) --no-print-directory lint

# the type check that make test ends with, on its own
lint: install
	$(PY) -m mypy --strict agentfsm

demo: install
	$(VENV)/bin/agentfsm run --tools agentfsm.testing.example_tools:TOOLS \
		"Multiply 12.5 by 4, then convert the result from km to miles." \
		--transcript runs/demo.jsonl

# Before each landing of a change to the model-facing path: the task suite (90 tasks, tuned
# and held-out splits), 40 cases per BFCL single-turn category and 30 per live one, on the
# embedded model with defaults; writes bench/results/quality.md (516 tasks and cases: about 30
# minutes on 2 cores).
quality: install
	nice -n 5 $(VENV)/bin/agentfsm eval quality --limit 40 --live-limit 30 --transcripts runs/quality

# While iterating: 10 cases per BFCL category (live included) and the tuned split in English
# and German (170 tasks and cases: about 12 minutes on 2 idle cores); writes runs/quality-fast.md.
quality-fast: install
	nice -n 5 $(VENV)/bin/agentfsm eval quality --fast --transcripts runs/quality-fast

diagrams: install debs
	$(PY) -m agentfsm diagram -o diagrams/agent.md
	$(PY) -m agentfsm diagram fixtures/transcripts -o diagrams/observed.md
	$(PY) diagrams/report_screenshot.py

bench: install peers
	$(PY) bench/run.py
	$(PY) bench/chaos.py

# The peer of the proxy bench (LiteLLM's proxy, pinned), in its own venv so its pins never
# touch the project's; bench/bench_proxy.py measures it beside agentfsm when it is there.
LITELLM_PIN := litellm[proxy]==1.83.0
.venv-peers/.installed:
	$(PYTHON) -m venv .venv-peers
	.venv-peers/bin/python -m pip install -q '$(LITELLM_PIN)'
	touch $@

peers: .venv-peers/.installed

bench-peers: install peers
	$(PY) bench/run.py --only proxy

# counts of what goes wrong under hostile input, upstream faults and load (bench/results/chaos.md)
chaos: install
	$(PY) bench/chaos.py

clean:
	rm -rf $(VENV) .venv-peers .clients build *.egg-info .mypy_cache .pytest_cache
