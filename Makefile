# natswitch: every target sets up what it needs, and set-up is a no-op once done.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
# Debian's Mininet lives in the system Python; the venv sees it through
# --system-site-packages, so it must be built from /usr/bin/python3.
SYSPY := /usr/bin/python3
DEBS  := python3-venv python3-dev mininet iputils-ping ethtool bridge-utils iperf tcpdump \
         tshark iproute2 procps
# Prebuilt BMv2 + PI + p4c for test machines (never part of the repository): where this
# folder exists, set-up installs it so the BMv2 and p4c tests run instead of skipping.
P4_TOOLCHAIN ?= $(abspath $(CURDIR)/../shared/p4-toolchain)
P4_TOOLCHAIN_DEBS := libboost-iostreams1.74.0 libboost-program-options1.74.0 \
         libboost-filesystem1.74.0 libboost-thread1.74.0 libgc1 libgmp10 libprotobuf32 \
         libgrpc++1.51 libgrpc29 libabsl20220623 libre2-9 libc-ares2 libthrift-0.17.0 \
         libnanomsg5 libpcap0.8 libssl3 xz-utils cpp python3-thrift python3-six
# The Tofino back end (../shared/p4-toolchain-tofino/README.md), in its own prefix.
P4_TOOLCHAIN_TOFINO ?= $(abspath $(CURDIR)/../shared/p4-toolchain-tofino)
P4_TOFINO_PREFIX ?= /opt/p4c-tofino
P4C_TOFINO := p4c-tofino
P4_TOFINO_DEBS := python3 gcc libgc1 libprotobuf32 libboost-iostreams1.74.0 zlib1g libbz2-1.0 \
         liblzma5 libzstd1 xz-utils
PYTEST_ARGS ?=
# Test processes for the parallel part of the suite (tests/conftest.py: the serial rest
# runs after it, alone): the machine's cores, at most 4.
TEST_JOBS ?= $(shell n=$$(nproc); echo $$(( n > 4 ? 4 : n )))
P4C   := p4c-bm2-ss
P4OUT := p4src/build

TOPO  ?= star
RUN_ARGS ?=

.PHONY: help setup debs toolchain toolchain-tofino venv test lint p4 p4-default p4-wide p4-wide4 \
	p4-tofino p4-twin p4-twin-mp run-mininet bench \
	clean

help:
	@echo "make setup        Debian packages and .venv (test, run-mininet and bench run it first)"
	@echo "make test         set up (Debian packages, .venv) and run lint + the whole test suite"
	@echo "make run-mininet  set up and run the default training job in Mininet (root);"
	@echo "                  TOPO=fat-tree for the k=4 fat-tree, RUN_ARGS='...' for more options"
	@echo "make p4           recompile p4src/ where the sources changed since the build:"
	@echo "                  p4src/build/ (168 elements per packet; make p4-default forces it)"
	@echo "                  p4src/build/wide/ (1456, ~15 min; make p4-wide forces it)"
	@echo "                  and p4src/build/wide4/ (1024, ~10 min; make p4-wide4 forces it);"
	@echo "                  needs p4c-bm2-ss on PATH"
	@echo "make p4-twin      recompile the Tofino profile's v1model twin (p4src/twin/, 16"
	@echo "                  elements per pass) into p4src/build/twin/, and make p4-twin-mp"
	@echo "                  its walk of 4 passes (64 per packet) into build/twin-mp/"
	@echo "make p4-tofino    compile the Tofino profile (p4src/tna/) for Tofino 1 and 2 and"
	@echo "                  write the compiler's summaries into p4src/build/tofino/;"
	@echo "                  needs p4c-tofino on PATH (make setup installs it where it can)"
	@echo "make bench        run the benchmarks and write docs/results.md"

setup: debs toolchain toolchain-tofino venv

# Installs only the Debian packages that are missing.
debs:
	@missing=$$(for p in $(DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
	    | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# Installs the prebuilt toolchain into / (its tested prefix) when it is there and BMv2 or
# p4c is not yet installed; elsewhere it says where users get them (README).
toolchain: debs
	@if [ ! -f "$(P4_TOOLCHAIN)/p4-toolchain-debian12-amd64.tar.xz" ]; then \
	  command -v simple_switch_grpc >/dev/null || \
	    echo "no BMv2 here and no $(P4_TOOLCHAIN): BMv2/p4c tests will skip (README: Getting BMv2 and p4c)"; \
	elif ! command -v simple_switch_grpc >/dev/null || ! command -v $(P4C) >/dev/null; then \
	  echo "installing the prebuilt P4 toolchain from $(P4_TOOLCHAIN)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $(P4_TOOLCHAIN_DEBS) && \
	  tar -xJf "$(P4_TOOLCHAIN)/p4-toolchain-debian12-amd64.tar.xz" -C / && ldconfig && \
	  simple_switch_grpc --version && $(P4C) --version; \
	fi

# The open-source Tofino back end (p4c 1.2.5.8 with p4c-barefoot), prebuilt for test machines
# and never part of the repository: where its folder exists and p4c-tofino is not on PATH,
# it goes into its own prefix (its p4include is newer than the BMv2 toolchain's p4c reads),
# so `make p4-tofino` and tests/test_p4_tofino.py run instead of skipping.
toolchain-tofino: debs
	@if [ ! -f "$(P4_TOOLCHAIN_TOFINO)/p4c-tofino-debian12-amd64.tar.xz" ]; then \
	  command -v $(P4C_TOFINO) >/dev/null || \
	    echo "no p4c-tofino here and no $(P4_TOOLCHAIN_TOFINO): the Tofino compile test will skip"; \
	elif ! command -v $(P4C_TOFINO) >/dev/null; then \
	  echo "installing the prebuilt Tofino back end from $(P4_TOOLCHAIN_TOFINO)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $(P4_TOFINO_DEBS) && \
	  mkdir -p $(P4_TOFINO_PREFIX) && \
	  tar -xJf "$(P4_TOOLCHAIN_TOFINO)/p4c-tofino-debian12-amd64.tar.xz" -C $(P4_TOFINO_PREFIX) && \
	  ln -sfn $(P4_TOFINO_PREFIX)/bin/p4c /usr/local/bin/$(P4C_TOFINO) && \
	  $(P4C_TOFINO) --version; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml | debs
	@test -x $(PY) || $(SYSPY) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,torch]'
	@touch $@

lint: venv
	$(VENV)/bin/ruff check .

# The tests keep compiled bytecode (pytest's rewritten test modules among it) in
# .venv/pycache, outside the tree, even where PYTHONDONTWRITEBYTECODE is set: otherwise every
# pytest process (each part's, each xdist worker's, the suite's own collection test) and every
# Python process a test starts compiles the same modules again.
TEST_ENV := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache

# Both parts always run; the target fails if either did (a part that selects no test of
# PYTEST_ARGS, pytest's exit code 5, is no failure).
test: setup lint
	@rc=0; export $(TEST_ENV); \
	$(PY) -m pytest -n $(TEST_JOBS) -m "not serial" $(PYTEST_ARGS) || { r=$$?; [ $$r = 5 ] || rc=$$r; }; \
	$(PY) -m pytest -m serial $(PYTEST_ARGS) || { r=$$?; [ $$r = 5 ] || rc=$$r; }; \
	exit $$rc

# The main job: star with 4 workers and C_nat (or TOPO=fat-tree, 16 workers),
# on BMv2 where simple_switch_grpc is installed, else on softswitch/.
run-mininet: setup
	$(PY) mininet/run.py --topo $(TOPO) $(RUN_ARGS)

# Recompiles the program where p4c is installed, once per profile (controller/profiles.py):
# 168 elements per packet into build/, 1456 (a full MTU of CNAT8) into build/wide/, 1024 (the
# fewest bytes per element for the 4-bit encodings) into build/wide4/.
# Elsewhere the committed builds are what runs (their sources' hash is checked by the tests).
# A profile is recompiled when the sources changed since its recorded hash (p4c takes 1-3 min
# for the default one here, 15-30 min and up to ~22 GB for each wide one: add swap on a 24 GB
# machine); make p4-default,
# make p4-wide and make p4-wide4 force it. tests/test_p4_build.py recompiles and compares
# the build itself.
p4:
	@command -v $(P4C) >/dev/null || { echo "$(P4C) is not on PATH; p4src/build/ stays as committed"; exit 1; }
	python3 p4src/gen_elements.py
	@h=$$(python3 p4src/build_tools.py hash); \
	for prof in default wide wide4; do \
	  dir=$(P4OUT); [ $$prof = default ] || dir=$(P4OUT)/$$prof; \
	  if [ -f $$dir/agg.json ] && [ "$$h" = "$$(cat $$dir/agg.sha256 2>/dev/null)" ]; then \
	    echo "$$dir/ was compiled from these sources (make p4-$$prof rebuilds it)"; \
	  else $(MAKE) --no-print-directory p4-$$prof || exit 1; fi; \
	done
	@for t in twin twin-mp; do \
	  if [ "$$(python3 p4src/build_tools.py hash-twin)" = "$$(cat $(P4OUT)/$$t/agg.sha256 2>/dev/null)" ]; then \
	    echo "$(P4OUT)/$$t/ was compiled from these sources (make p4-$$t rebuilds it)"; \
	  else $(MAKE) --no-print-directory p4-$$t || exit 1; fi; \
	done

p4-default:
	@command -v $(P4C) >/dev/null || { echo "$(P4C) is not on PATH; p4src/build/ stays as committed"; exit 1; }
	python3 p4src/gen_elements.py
	python3 p4src/build_tools.py compile $(P4OUT) 168
	python3 p4src/build_tools.py hash > $(P4OUT)/agg.sha256

p4-wide:
	@command -v $(P4C) >/dev/null || { echo "$(P4C) is not on PATH; p4src/build/wide/ stays as committed"; exit 1; }
	python3 p4src/gen_elements.py
	python3 p4src/build_tools.py compile $(P4OUT)/wide 1456
	python3 p4src/build_tools.py hash > $(P4OUT)/wide/agg.sha256

p4-wide4:
	@command -v $(P4C) >/dev/null || { echo "$(P4C) is not on PATH; p4src/build/wide4/ stays as committed"; exit 1; }
	python3 p4src/gen_elements.py
	python3 p4src/build_tools.py compile $(P4OUT)/wide4 1024
	python3 p4src/build_tools.py hash > $(P4OUT)/wide4/agg.sha256

# The v1model twin of the Tofino profile (p4src/twin/): the TNA program's slot, pair
# registers and tables at 16 elements per pass, for BMv2 and softswitch (profile tofino).
p4-twin:
	@command -v $(P4C) >/dev/null || { echo "$(P4C) is not on PATH; p4src/build/twin/ stays as committed"; exit 1; }
	python3 p4src/tna/gen_tna.py
	python3 p4src/build_tools.py compile-twin $(P4OUT)/twin 16
	python3 p4src/build_tools.py hash-twin > $(P4OUT)/twin/agg.sha256

# The twin of the cnat8-mp variants (p4src/tna/passes_tna.p4): packets of 4 segments of 16
# CNAT8 codes, one summed a pass, the passes recirculated (profile tofino-mp).
p4-twin-mp:
	@command -v $(P4C) >/dev/null || { echo "$(P4C) is not on PATH; p4src/build/twin-mp/ stays as committed"; exit 1; }
	python3 p4src/tna/gen_tna.py
	python3 p4src/build_tools.py compile-twin $(P4OUT)/twin-mp 16 4
	python3 p4src/build_tools.py hash-twin > $(P4OUT)/twin-mp/agg.sha256

# The Tofino profile (docs/PROTOCOL.md "Tofino profile"): each variant of p4src/tna/build_tofino.py
# compiled one after the other (a minute to several each), its full output in
# p4src/build/tofino-out/ (not committed), the summary of the compiler's report in
# p4src/build/tofino/VARIANT.json (committed, with the hash of the sources it came from;
# tests/test_p4_tofino.py recompiles one and checks every hash).
TOFINO_VARIANTS ?= $(shell python3 p4src/tna/build_tofino.py list)
p4-tofino:
	@command -v $(P4C_TOFINO) >/dev/null || { echo "$(P4C_TOFINO) is not on PATH; p4src/build/tofino/ stays as committed"; exit 1; }
	python3 p4src/tna/gen_tna.py
	@for v in $(TOFINO_VARIANTS); do python3 p4src/tna/build_tofino.py build $$v || exit 1; done

# The benchmarks (the Mininet ones need root; about 40 min on 2 cores): docs/results.md
# and docs/results/*.png. BENCH_QUICK=1 for a smoke run (report in results/bench/results.md).
bench: setup
	BENCH_QUICK="$(BENCH_QUICK)" $(PY) bench/all.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
