# liqo.fabric — every target does its own set-up, idempotently, then runs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
COLL_ROOT := $(CURDIR)/build/collections
COLL_LINK := $(COLL_ROOT)/ansible_collections/liqo/fabric
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_HOME := $(CURDIR)/build/ansible-home
export ANSIBLE_COLLECTIONS_PATH := $(COLL_ROOT)
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: all setup sysdeps nodedeps venv kube image collection demo test fast lint unit integration e2e e2e-light e2e-real plain molecule sanity matrix bench coverage lab-clean clean

all: test

setup: sysdeps venv collection kube nodedeps image

# containerd, runc, CNI plugins, iptables, conntrack, mmdebstrap: real-node labs and `make image`
nodedeps:
	@bash hack/install-node-deps.sh

sysdeps:
	@bash hack/install-system-deps.sh

$(VENV)/.stamp: requirements-dev.txt requirements-test.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check -r requirements-test.txt
	@# compat mode: a plain path in a .pth, not an import hook run by every Python start (every module run)
	@$(PY) -m pip install -q --disable-pip-version-check --no-deps --config-settings editable_mode=compat -e .
	@rm -rf *.egg-info
	@touch $@

# Module runs through this venv's Python take their bytecode from a cache (plugins/plugin_utils/speed/ansiballz_cache.py
# and the speed paths' switch beside it, copied as the package liqo_fabric_speed: the collection is not importable
# when a Python starts).
SPEED := plugins/plugin_utils/speed
$(VENV)/.ansiballz-cache: $(SPEED)/ansiballz_cache.py $(SPEED)/switch.py $(VENV)/.stamp
	@site=$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \
	  rm -f "$$site/liqo_fabric_ansiballz_cache.py" && install -d "$$site/liqo_fabric_speed" && \
	  install -m 0644 $(SPEED)/ansiballz_cache.py $(SPEED)/switch.py "$$site/liqo_fabric_speed/" && \
	  : > "$$site/liqo_fabric_speed/__init__.py" && \
	  echo 'import liqo_fabric_speed.ansiballz_cache; liqo_fabric_speed.ansiballz_cache.install()' \
	    > "$$site/liqo_fabric_ansiballz_cache.pth"
	@touch $@

venv: $(VENV)/.stamp $(VENV)/.ansiballz-cache

collection:
	@mkdir -p $(dir $(COLL_LINK)) $(ANSIBLE_HOME)
	@test -L $(COLL_LINK) || ln -sfn $(CURDIR) $(COLL_LINK)

# The project's images as OCI archives under ~/.cache/liqo-fabric/images, built without any registry and
# cached by a digest of their inputs (deploy/image/build.sh prints their names and paths). Another version's fabric
# image, under its own tag: `make image IMAGE_TREE=DIR IMAGE_VERSION=TAG` (DIR: e.g. a `git archive` of a commit).
image: venv nodedeps
	@bash deploy/image/build.sh

# Prints where kube-apiserver lives (built once and cached, or $$KUBE_APISERVER_BIN).
kube:
	@bash hack/build-kube-apiserver.sh >/dev/null

demo: setup
	@$(PY) -m tests.lab demo

test: setup
	@bash hack/run-tests.sh all

# the layers of the suite, each alone (CONTRIBUTING.md gives their times)
fast: venv collection
	@bash hack/run-tests.sh fast

lint: venv collection
	@bash hack/run-tests.sh lint

unit: venv collection
	@bash hack/run-tests.sh unit

integration: setup
	@bash hack/run-tests.sh integration

e2e: setup
	@bash hack/run-tests.sh e2e

e2e-light: setup
	@bash hack/run-tests.sh e2e-light

e2e-real: setup
	@bash hack/run-tests.sh e2e-real

# the speed-paths-off contract (tests/e2e/plain, docs/speed-paths.md); part of the e2e group
plain: setup
	@bash hack/run-tests.sh plain

# lint, unit, sanity and the e2e contract on every ansible-core of hack/matrix (2.16-2.19 on the project's Python;
# 2.20 and 2.21 where a Python 3.12 is installed), each in a venv of its own built once under
# ~/.cache/liqo-fabric/venvs (hack/matrix.sh, docs/ansible-versions.md); MATRIX="2.16 2.18" runs some of them
matrix: setup
	@bash hack/matrix.sh $(MATRIX)

molecule: setup
	@bash hack/run-tests.sh molecule

sanity: venv collection
	@bash hack/run-tests.sh sanity

bench: setup
	@$(PY) -m tests.benchmarks

# line coverage of plugins/ and controller/ over the whole suite, per package (hack/coverage.sh)
coverage: setup
	@bash hack/coverage.sh

# Removes what crashed labs left behind: only labs whose owner process is gone (ALL=1: every lab).
lab-clean: venv
	@$(PY) -m tests.lab clean $(if $(ALL),--all)

clean: lab-clean
	rm -rf build
