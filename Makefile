# hwtrain: the two commands a user needs.
#   make run   installs dependencies if missing, builds (Release) and trains on the default corpus
#   make test  installs dependencies if missing, builds and runs the test suite through ctest, then
#              fuzzes every parser of untrusted input for FUZZ_SECONDS each (libFuzzer, clang;
#              scripts/fuzz.sh --ci; FUZZ_SECONDS=0 skips it)
#   make test SANITIZE=address,undefined   the same under sanitizers, in build-sanitize-<names>
#                                          (scripts/sanitize.sh sets the runtime options)
BUILD_DIR ?= build
BUILD_TYPE ?= Release
SANITIZE ?=
comma := ,
ifneq ($(SANITIZE),)
BUILD_DIR := build-sanitize-$(subst $(comma),-,$(SANITIZE))
BUILD_TYPE := RelWithDebInfo
endif
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 15
# Seconds per test (scripts/sanitize.sh gives instrumented tests more).
TEST_TIMEOUT ?= 600
TORCH_PYTHON_FILE := $(BUILD_DIR)/torch-python

.PHONY: all deps configure build build-cli run test bench clean

all: build

deps:
	@bash scripts/install-deps.sh $(TORCH_PYTHON_FILE)

# Ninja (installed by the deps script) spreads the unity units of every area over the cores better
# than Make's per-directory recursion; a build directory keeps the generator it was created with.
configure: deps
	@gen=$$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' $(BUILD_DIR)/CMakeCache.txt 2>/dev/null); \
	if [ -z "$$gen" ]; then if command -v ninja >/dev/null; then gen=Ninja; else gen="Unix Makefiles"; fi; fi; \
	cmake -S . -B $(BUILD_DIR) -G "$$gen" -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DHWTRAIN_TORCH_PYTHON="$$(cat $(TORCH_PYTHON_FILE))" -DHWTRAIN_SANITIZE="$(SANITIZE)"

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# The binary alone: `make run` need not compile the tests and benchmarks.
build-cli: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target hwtrain_cli

run: build-cli
	./$(BUILD_DIR)/hwtrain train $(ARGS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout $(TEST_TIMEOUT)
	@if [ -z "$(SANITIZE)" ] && [ "$(FUZZ_SECONDS)" != 0 ]; then bash scripts/fuzz.sh --ci $(FUZZ_SECONDS); fi

bench: build
	bash bench/run-all.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
