# The two commands of the README:  `make demo`  and  `make test`.
# Everything else here is what they need on a fresh machine.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-$(shell sha256sum requirements.txt | cut -c1-12)
HOST    ?= 127.0.0.1:8000

.PHONY: demo test venv chromium bench clean

venv: $(STAMP)
$(STAMP): requirements.txt
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

# Debian's Chromium for the browser tests (Playwright's own browser download does not work offline).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi; }

demo: venv
	$(BIN)/python manage.py migrate --no-input -v 0
	$(BIN)/python manage.py demo --host $(HOST)
	$(BIN)/python manage.py runserver --insecure $(HOST)  # DEBUG stays off; --insecure serves the static files

test: venv chromium
	$(BIN)/python -m pytest -q

bench: venv
	$(BIN)/python bench/run_all.py

clean:
	rm -rf var staticfiles
