# bv: `make demo` runs the whole pipeline offline; `make test` runs the tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEMO   := build/demo
N      ?= 40
JOBS   ?= 32

.PHONY: demo optimize-demo test test-real test-trackers test-interop docs data eval bench lint clean

# Install bv and its test extra into .venv; redone when the package metadata changes.
$(VENV)/.installed: setup.cfg pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "bv needs Python 3.11 or newer (set PYTHON=...)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	@mkdir -p $(DEMO)
	$(BIN)/bv synth --n $(N) --seed 0 --out $(DEMO)/data
	$(BIN)/bv prompt $(DEMO)/data/meta_data.jsonl \
	  | $(BIN)/bv rollout --backend chance --repeats 3 -j $(JOBS) --quiet \
	  | $(BIN)/bv judge --mode rules --quiet > $(DEMO)/results.jsonl
	$(BIN)/bv report $(DEMO)/results.jsonl --html $(DEMO)/report.html

# bv optimize end to end, offline: 96 bv synth items, two loopback models (tests/support/skillserver.py: a
# target that needs the skill's hints, a scripted optimizer), the run folder in build/demo/optimize-run/
# (docs/optimize.md). Run it again and it resumes: every reply comes from the cache.
optimize-demo: $(VENV)/.installed
	$(BIN)/bv synth --n 96 --seed 0 --out $(DEMO)/optimize-data
	$(BIN)/python tests/support/skillserver.py $(DEMO)/optimize-data $(DEMO)/optimize-run \
	  --ratio 2:3:3 --batch-size 8 --edits 2 --repeats 2 --epochs 3

# The HTML viewer's browser test needs Chromium: installed here when missing and we may (root,
# Debian); elsewhere that one test skips and says why. The tests run on every core (pytest-xdist),
# a test file's tests on one worker, in order; TEST_WORKERS=0 runs them all in this process.
TEST_WORKERS ?= auto
CHROMIUM = command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1 \
	  || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
test: $(VENV)/.installed
	@$(CHROMIUM)
	$(BIN)/python -m pytest -q -rs -n $(TEST_WORKERS) --dist loadfile

# bv against real server software (tests/real/): `transformers serve` with a tiny random-weight VLM
# built on the spot, a LiteLLM proxy, a single-node SLURM. Each is installed by tests/real/install.sh
# into a venv of its own under .venv-real (SLURM from Debian's packages, as root), so `make test`
# stays fast; a part that cannot be installed is skipped with its reason. Prints the versions run against.
REAL ?= .venv-real
test-real: $(VENV)/.installed
	PYTHON=$(PYTHON) sh tests/real/install.sh $(REAL)
	BV_TEST_REAL=1 BV_REAL_VENV=$(REAL) PYTHONPATH=tests $(BIN)/python -m pytest -q -n 0 -rs \
	  -p support.real_parts tests/real

# The experiment trackers against the real thing (docs/tracking.md): an MLflow tracking server the
# tests start (SQLite, loopback) and W&B offline runs read back from their files. mlflow and wandb
# are heavy (a server, a Go binary; ~2 min to install), so they live in their own .venv-trackers,
# not in `make test`, where these tests skip and say why.
TRACKERS := .venv-trackers
$(TRACKERS)/.installed: setup.cfg pyproject.toml
	test -x $(TRACKERS)/bin/python || $(PYTHON) -m venv $(TRACKERS)
	$(TRACKERS)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test,mlflow,wandb]'
	touch $@

test-trackers: $(TRACKERS)/.installed
	$(TRACKERS)/bin/python -m pytest -q -n 2 --dist loadfile tests/tracking/ \
	  tests/project/test_layers.py

# The other evaluation tools' own software (docs/formats.md): inspect_ai reads back the eval log bv
# exports, `inspect view` serves it to headless Chromium (a screenshot lands in build/), and a real
# inspect eval's log is imported. inspect-ai is heavy, so it lives in its own .venv-interop, not in
# `make test`, where these tests skip and say why. It also runs the other formats' tests (lmms-eval,
# VLMEvalKit with its xlsx files, Every Eval Ever against its schema, the Hub's eval results) and a
# backend plugin installed into a venv, so one target shows every interop. Add a tool's tests to INTEROP_TESTS.
INTEROP := .venv-interop
INTEROP_TESTS := tests/reporting/test_inspect_log.py tests/data/test_inspect_import.py \
  tests/data/test_lmms_eval.py tests/data/test_vlmevalkit.py tests/reporting/test_eee.py \
  tests/reporting/test_hf_eval_results.py tests/engine/test_backend_plugins.py
$(INTEROP)/.installed: setup.cfg pyproject.toml
	test -x $(INTEROP)/bin/python || $(PYTHON) -m venv $(INTEROP)
	$(INTEROP)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test,inspect,xlsx]'
	touch $@

test-interop: $(INTEROP)/.installed
	@$(CHROMIUM)
	$(INTEROP)/bin/python -m pytest -q -n 2 --dist loadfile -rs $(INTEROP_TESTS)
	@! test -f build/inspect-view.png || echo "make test-interop: inspect view's page, screenshotted: build/inspect-view.png"

# The docs site (mkdocs.yml, docs/) into build/site, with warnings as errors: every page in the nav,
# every link and anchor checked, the CLI reference written from the click commands and the API
# reference from bv.api's docstrings at each build. MkDocs, Material and mkdocstrings (the docs extra)
# live in their own .venv-docs. Open build/site/index.html, or serve it: .venv-docs/bin/mkdocs serve.
DOCS := .venv-docs
$(DOCS)/.installed: setup.cfg pyproject.toml
	test -x $(DOCS)/bin/python || $(PYTHON) -m venv $(DOCS)
	$(DOCS)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[docs]'
	touch $@

docs: $(DOCS)/.installed
	NO_MKDOCS_2_WARNING=1 $(DOCS)/bin/python -m mkdocs build --strict --clean

# make data [DATA=folder]: the official 388 items, fetched from the Hugging Face Hub and checked
# (docs/data.md); by default into bv's data folder ($XDG_DATA_HOME/bv/babyvision).
data: $(VENV)/.installed
	$(BIN)/bv data $(if $(DATA),--out $(DATA))

# make eval MODEL=gpt-4o [BASE_URL=http://localhost:8000/v1] [JUDGE_MODEL=gpt-4o-mini]
#           [ITEMS=path/to/meta_data.jsonl] [REPEATS=3]
# A thin call of `bv eval` (without ITEMS: the set `make data` wrote); the run folder is
# build/eval/<model>/ (a / in the model name becomes _); make fails when the evaluation does, and
# running it again resumes it from the reply cache.
ITEMS ?= $(if $(DATA),$(DATA)/meta_data.jsonl)
REPEATS ?= 1
EVAL_DIR = build/eval/$(subst /,_,$(MODEL))
eval: $(VENV)/.installed
	$(BIN)/bv eval $(if $(ITEMS),"$(ITEMS)") $(if $(MODEL),-m "$(MODEL)") $(if $(BASE_URL),--base-url "$(BASE_URL)") \
	  $(if $(JUDGE_MODEL),--judge-model "$(JUDGE_MODEL)") --repeats $(REPEATS) -j $(JOBS) -o "$(EVAL_DIR)"

# Figures, not tests, each beside its limit measured in the same run: throughput, memory and start-up
# of bv, an optimize gate over cached replies, judge/report/merge/export at 1M rows (bench/README.md; 22 minutes on a quiet machine, 18 of them the rows).
bench: $(VENV)/.installed
	$(BIN)/python bench/rollout_bench.py --repeat 3
	$(BIN)/python bench/startup_bench.py
	$(BIN)/python bench/rescore_bench.py
	$(BIN)/python bench/rows_bench.py

lint: $(VENV)/.installed
	$(BIN)/python -m pytest -q tests/project/test_lint.py

clean:
	rm -rf build $(VENV) $(TRACKERS) $(INTEROP) $(DOCS) *.egg-info
