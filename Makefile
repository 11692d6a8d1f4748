# eaglet: `make demo` runs the main job, `make test` installs what is missing, builds and runs every test.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS       ?= $(shell nproc)
MODEL      ?= ../shared/models/pycode-llama-19m

.PHONY: all deps build test test-asan fuzz demo bench clean

all: build

deps:
	@bash scripts/deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan

# Every test again under AddressSanitizer + UBSan (bad-input tests above all: corrupt files, malformed configs, CLI misuse).
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DEAGLET_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

# libFuzzer (clang) on every parser of untrusted files, FUZZ_SECONDS each under ASan/UBSan (fuzz/, README "Fuzzing").
fuzz:
	@bash scripts/deps.sh clang libclang-rt-dev
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ -DEAGLET_FUZZ=ON \
	      -DEAGLET_BUILD_TESTS=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target eaglet_fuzzers
	bash scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

demo: build
	$(BUILD)/eaglet generate -m $(MODEL) -n 96 -p "$$(printf 'import os\n\n\ndef list_python_files(root):\n')"

bench: build
	$(BUILD)/eaglet bench --plain

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
