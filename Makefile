PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: up test unit lint typecheck pytest browser bench faults fidelity sync-proof realcalendars clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

up: $(STAMP)
	$(BIN)/calagent up

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy libs services apps tests

# The page's end-to-end tests drive Debian's Chromium through Playwright (tests/e2e/test_web.py);
# nothing downloads a browser. Installed once, quietly, when missing (CI runs as root); a CJK font
# so Chinese renders in the screenshots.
BROWSER_PACKAGES := chromium fonts-wqy-microhei

browser:
	@missing=""; \
	for pkg in $(BROWSER_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if ! command -v apt-get >/dev/null; then \
	    [ -x /usr/bin/chromium ] && exit 0; \
	    echo "the browser tests need Chromium at /usr/bin/chromium (or CALAGENT_CHROMIUM)" >&2; exit 1; \
	  fi; \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo -n"; \
	  echo "installing$$missing (apt-get, for the browser tests)"; \
	  log=$$(mktemp); \
	  { $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; } >$$log 2>&1 \
	    || { cat $$log >&2; rm -f $$log; exit 1; }; \
	  rm -f $$log; \
	fi

pytest: $(STAMP) browser
	$(BIN)/pytest -q --durations=30

test: lint typecheck pytest

# The inner loop: the unit tier alone (pure code, no servers; pyproject's `unit` marker), in under
# a minute on a two-core machine: its property tests run a fifth of their examples
# (devtools/testing/examples.py). `make test` runs it too, every count in full, with the rest.
unit: $(STAMP)
	CALAGENT_EXAMPLES_SCALE=0.2 $(BIN)/pytest -q -m unit

bench: $(STAMP)
	$(BIN)/calagent bench

# The fidelity fuzz's long run (`make test` keeps a short one): generated calendar objects patched
# in memory, then round trips through the commands service and a Radicale server.
fidelity: $(STAMP)
	CALAGENT_FIDELITY_FUZZ_EXAMPLES=3000 $(BIN)/pytest -q services/commands/tests/unit/test_fidelity_patch.py
	CALAGENT_FIDELITY_E2E_EXAMPLES=300 $(BIN)/pytest -q tests/e2e/test_fidelity.py -k generated

# The sync proof's long run (`make test` keeps a short one): the Hypothesis state machine of
# tests/e2e/test_sync_proof.py drives the sync against Radicale through the fault-injecting proxy —
# chat and app writes, deletes on both sides, faults, killed syncs — and prints the sequences and
# steps it ran.
sync-proof: $(STAMP)
	CALAGENT_SYNC_PROOF_EXAMPLES=200 CALAGENT_SYNC_PROOF_STEPS=50 CALAGENT_SYNC_PROOF_RANDOM=1 \
	CALAGENT_SYNC_PROOF_TIMEOUT=7200 $(BIN)/pytest -q -s -p no:logging tests/e2e/test_sync_proof.py

# Real clients' calendars (issue 44; `make test` keeps a sample on Xandikos): every file of
# tests/e2e/realcalendars.toml synced through Radicale and Xandikos and compared with
# recurring-ical-events' reading; prints what each account named and why.
realcalendars: $(STAMP)
	CALAGENT_REAL_CALENDARS=all $(BIN)/pytest -q -s tests/e2e/test_real_calendars.py

# The fault suite (not part of `make test`, which keeps a short smoke of it): hundreds of SIGKILLs
# of every part of a running system under load; prints faults, turns, lost, duplicated, 5xx and the
# slowest recovery, and fails when anything was lost. Then a round on a three-node NATS cluster,
# where each nats-server fault kills one node at random.
faults: $(STAMP)
	CALAGENT_FUZZ_EXAMPLES=1000 $(BIN)/pytest -q -s tests/e2e/test_http_fuzz.py
	$(BIN)/calagent faults
	$(BIN)/calagent faults --nats-cluster 3 --kills 70

clean:
	rm -rf $(VENV) .calagent .mypy_cache .pytest_cache .ruff_cache
