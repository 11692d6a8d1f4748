# eaglet: `make demo` runs the main job, `make test` installs what is missing, builds and runs every test.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS       ?= $(shell nproc)
MODEL      ?= ../shared/models/pycode-llama-19m
DRAFTER    ?= drafters/pycode-llama-19m-eagle3
DRAFTER_WORK ?= models/pycode-drafter-work
DEMO_PROMPT ?= import os\n\n\ndef list_python_files(root):\n
DRAFTER_TRAIN_FLAGS ?= --epochs 2 --lr 2e-3 --eval-every 400
DEMO_SPEC  ?=

.PHONY: all deps build test test-asan fuzz demo drafter bench clean

all: build

deps:
	@bash scripts/deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DEAGLET_BUILD_TESTS=ON -DEAGLET_TRAINER=ON
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan

# Every test again under AddressSanitizer + UBSan (bad-input tests above all: corrupt files, malformed configs, CLI misuse).
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DEAGLET_SANITIZE=ON -DEAGLET_BUILD_TESTS=ON -DEAGLET_TRAINER=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

# libFuzzer (clang) on every parser of untrusted files, FUZZ_SECONDS each under ASan/UBSan (fuzz/, docs/tests.md "Fuzzing").
fuzz:
	@bash scripts/deps.sh clang libclang-rt-dev
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ -DEAGLET_FUZZ=ON \
	      -DEAGLET_BUILD_TESTS=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target eaglet_fuzzers
	bash scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# The main job: one prompt decoded by the target alone and with the shipped EAGLE-3 drafter (greedy), both texts
# compared, accept len, per-depth acceptance and both speeds printed. Installs and builds only what running needs.
demo:
	@bash scripts/deps.sh --run
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DEAGLET_BUILD_TESTS=OFF -DEAGLET_TRAINER=OFF
	cmake --build $(BUILD) -j $(JOBS) --target eaglet
	$(BUILD)/eaglet generate -m $(MODEL) -d $(DRAFTER) $(DEMO_SPEC) -n 128 --compare -p "$$(printf '$(DEMO_PROMPT)')"

# Reproduces the shipped drafter $(DRAFTER) with eaglet's own commands (docs/training.md, "The default drafter").
drafter: build
	mkdir -p $(DRAFTER_WORK) $(DRAFTER)
	python3 scripts/pycode_corpus.py --out $(DRAFTER_WORK)/corpus.jsonl --chars 2000000 --chunk-chars 650
	$(BUILD)/eaglet extract -m $(MODEL) --data $(DRAFTER_WORK)/corpus.jsonl --out $(DRAFTER_WORK)/extract \
	    --regenerate --regenerate-max-tokens 160 --draft-vocab 4096 --layers 2,4,7
	$(BUILD)/eaglet train-draft -m $(MODEL) --data $(DRAFTER_WORK)/extract --out $(DRAFTER_WORK)/trained \
	    $(DRAFTER_TRAIN_FLAGS)
	cp $(DRAFTER_WORK)/trained/config.json $(DRAFTER_WORK)/trained/model.safetensors \
	   $(DRAFTER_WORK)/trained/eaglet_training.json $(DRAFTER)/

bench: build
	$(BUILD)/eaglet bench plain

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
