# The README's two commands: `make demo` and `make test`. Both install what they need first
# (scripts/install-deps.sh is idempotent), then build with CMake.
JOBS   ?= 2
BUILD  ?= build
ASAN   ?= build-asan
FUZZ   ?= build-fuzz
FUZZ_SECONDS ?= 20
CMAKE_FLAGS ?=

.PHONY: all deps build demo test test-release test-asan test-fuzz bench format format-check clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)/calq

test: build
	@$(MAKE) --no-print-directory test-release test-asan test-fuzz format-check

test-release:
	@echo "== tests (release build) =="
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-asan:
	@echo "== tests (AddressSanitizer + UndefinedBehaviorSanitizer build) =="
	@cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCALQ_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN) -j$(JOBS)
	@cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ctest --output-on-failure -j$(JOBS) -LE bench

test-fuzz:
	@echo "== fuzz targets (libFuzzer, $(FUZZ_SECONDS) s each) =="
	@CC=clang cmake -S . -B $(FUZZ) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCALQ_FUZZ=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(FUZZ) -j$(JOBS) --target fuzzers
	@bash scripts/run-fuzzers.sh $(FUZZ) $(FUZZ_SECONDS)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	@echo "== clang-format =="
	@clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h') && echo "clang-format: clean"

bench: build
	@bash bench/forward.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN) $(FUZZ)
