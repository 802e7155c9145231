# cbench: `make demo` runs the main job on the embedded local hub; `make test` runs the tests.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

VENV_TL4  := .venv-tl4
TL4_STAMP := $(VENV_TL4)/.installed

.PHONY: setup setup-tl4 demo test test-slow test-all test-browser bench dist clean

setup: $(STAMP)

setup-tl4: $(TL4_STAMP)

# torch==2.13.0 is installed first and on its own: that CPU build lies on this
# machine's disk, and pinning it before the rest keeps pip from pulling a CUDA build.
# bubblewrap (Debian's `bubblewrap`, the `bwrap` binary) is the OS boundary of `cbench find
# score` (SECURITY.md); installed here as root when missing, else its absence is only reported:
# scoring then refuses to run submitted code (or runs it with --trust-code).
$(STAMP): pyproject.toml
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else \
	    echo "note: bubblewrap (bwrap) is not installed; \`cbench find score\` refuses to run submitted code" \
	         "until it is (as root: apt-get install bubblewrap)" >&2; \
	  fi; }
	@echo "setup 1/3: creating $(VENV) and upgrading pip (under a minute)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@echo "setup 2/3: installing torch 2.13.0, CPU build (about a minute)"
	$(PY) -m pip install --quiet torch==2.13.0
	@echo "setup 3/3: installing cbench and its dependencies (2-4 minutes on a fresh machine, quiet meanwhile)"
	$(PY) -m pip install --quiet -e '.[build,hub,test,ray]'
	touch $(STAMP)
	@echo "setup: done ($(VENV))"

# TransformerLens 4.3 beside the 3.9 that cbench uses, for tests/test_transformer_lens4.py: a second
# venv that sees the main venv's packages through one .pth line (torch 2.13.0 CPU, transformers and
# every other dependency of transformer-lens 4.3 are already there, at the versions pip would pick)
# and installs transformer-lens 4.3 itself on top without dependencies: no second torch is ever
# downloaded, so pip cannot pull a CUDA build. About 10 s of CPU (docs/loading.md).
$(TL4_STAMP): $(STAMP)
	$(PYTHON) -m venv $(VENV_TL4)
	$(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
	  > "$$($(VENV_TL4)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/cbench-main-venv.pth"
	$(VENV_TL4)/bin/python -m pip install --quiet --no-deps 'transformer-lens==4.3.*' psutil
	$(VENV_TL4)/bin/python -c 'from transformer_lens.model_bridge import TransformerBridge'
	touch $(TL4_STAMP)

demo: setup
	$(VENV)/bin/cbench demo

# the tests run on every CPU (pytest-xdist, one worker per core; each test file stays on one
# worker, so its module fixtures are built once): TEST_WORKERS=0 runs them in this process
TEST_WORKERS ?= auto
XDIST := -n $(TEST_WORKERS) --dist loadfile

test: setup $(TL4_STAMP)
	$(PY) -m pytest $(XDIST)

test-slow: setup $(TL4_STAMP)
	$(PY) -m pytest $(XDIST) -m slow

test-all: setup $(TL4_STAMP)
	$(PY) -m pytest $(XDIST) -m ''

# issue 21: the HTML report opened by headless Chromium (Debian's chromium + chromium-driver,
# installed here when missing; selenium from PyPI). Not part of `make test`.
test-browser: setup
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }
	@$(PY) -c 'import selenium' 2>/dev/null || $(PY) -m pip install --quiet -e '.[browser]'
	$(PY) -m pytest -m browser

bench: setup
	$(PY) benchmarks/bench_pull.py
	$(PY) benchmarks/bench_discovery.py
	$(PY) benchmarks/bench_methods.py
	$(PY) benchmarks/bench_siit.py

# a wheel of the one distribution (client, builders, schemas) in dist/, for `pip install dist/cbench-*.whl`
# elsewhere; built with the venv's setuptools, so nothing is downloaded
dist: setup
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation -w dist .
	@ls dist/cbench-*.whl

clean:
	rm -rf $(VENV) $(VENV_TL4) build dist *.egg-info .pytest_cache .hypothesis
