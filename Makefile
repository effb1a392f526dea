# deepdesk — one program: web app, job scheduler and workers.
#
#   make          build build/deepdesk (and the test build, build/deepdesk-test)
#   make run      install what is missing, build, start the app on :5010 (data in ./data)
#   make test     install what the tests need, build, run every test
#   make asan     build the unit tests and both programs with AddressSanitizer and
#                 UBSan into build-asan/, run them and a few API suites (tests/asan.sh);
#                 any sanitizer report, in the tests or in a worker, fails it
#   make fuzz     run each libFuzzer target in tests/fuzz/ for FUZZ_SECONDS (120) with
#                 clang's ASan and UBSan; fuzz-smoke (CI) runs each for 10 s
#   make kill-campaign  SIGKILL the server, workers and the inference service at
#                 seeded moments of real jobs KILL_ITERATIONS (50) times, checking
#                 that nothing is lost (tests/campaign/kill.mjs; 8 run in make test)
#   make bench    run the benchmarks in bench/ beside their peers
#   make clean    remove build/ and build-asan/
#
# Debian packages are the only dependencies: `make deps` installs them (as root) or
# prints the apt-get line.  The CUDA backend is built only where nvcc and cuDNN are.

CC      ?= cc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -Wno-unused-parameter -Wshadow \
           -Wformat=2 -Wno-format-truncation -fno-strict-aliasing -MMD -MP -pthread
CFLAGS  += $(SANITIZE)
LDLIBS  := -lcivetweb -lsqlite3 -lcjson -llmdb -lpng -lturbojpeg -larchive -lz -ldnnl -lgvc -lcgraph -lsodium -lgomp -lpthread -lm
BUILD   := build
# HTTPS helpers (app/http/tls_shim.c); without OpenSSL's headers, serve refuses --tls-cert
TLS_SHIMS := $(if $(wildcard /usr/include/openssl/ssl.h),$(BUILD)/tls/libssl.so $(BUILD)/tls/libcrypto.so)
Q       := $(if $(V),,@)

# --- what Debian must provide -------------------------------------------------
RUN_PKGS  := gcc make libc6-dev libcivetweb-dev libsqlite3-dev libcjson-dev liblmdb-dev \
             libpng-dev libturbojpeg0-dev libarchive-dev zlib1g-dev libjs-chart.js \
             libjs-codemirror libdnnl-dev libgraphviz-dev libsodium-dev libssl-dev dataset-fashion-mnist
TEST_PKGS := $(RUN_PKGS) node=nodejs npm=npm chromium wrk openssl python3-lmdb python3-protobuf python3-pil libopenblas0-pthread \
             python3-numpy python3-torch slurmctld slurmd slurm-client munge clang=clang

# --- CUDA: built only where the toolkit and cuDNN are installed ----------------
CUDA_HOME ?= /usr/local/cuda
NVCC      := $(wildcard $(CUDA_HOME)/bin/nvcc)
CUDNN_H   := $(wildcard $(CUDA_HOME)/include/cudnn.h /usr/include/cudnn.h)
# The plugin build/libdeepdesk-cuda.so (networks/cuda/): the programs never link
# CUDA; networks/backend.c dlopens the plugin when "cuda" is asked for.  CUDA 13
# builds Turing to Hopper (SASS for sm_75 80 86 89 90, PTX for 90 so newer GPUs JIT
# it); it has dropped Volta (sm_70), which would need CUDA 12.
CUDA_ARCH  ?= -gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 \
              -gencode arch=compute_86,code=sm_86 -gencode arch=compute_89,code=sm_89 \
              -gencode arch=compute_90,code=[sm_90,compute_90]
NVFLAGS    ?= -O2
NVFLAGS    += -std=c++17 -Xcompiler -fPIC,-Wall,-Wextra,-Wno-unused-parameter,-Wno-format-truncation,-Werror \
              -Werror all-warnings
CUDA_LIBS  := -L$(CUDA_HOME)/lib64 -Xlinker -rpath=$(CUDA_HOME)/lib64 -lcudnn -lcublas -lcudart
CUDA_PLUGIN := $(BUILD)/libdeepdesk-cuda.so
ifneq ($(and $(NVCC),$(CUDNN_H)),)
CUDA_SAY   := ✓ nvcc and cuDNN found in $(CUDA_HOME): building $(CUDA_PLUGIN) (loaded where a GPU answers)
# whether this build has a CUDA backend (/api/v1/info "build.cuda")
CUDA_BUILT := 1
CUDA_TARGETS := $(CUDA_PLUGIN)
else
CUDA_SAY   := ✗ nvcc or cuDNN not found under $(CUDA_HOME): CPU only
CUDA_BUILT := 0
CUDA_TARGETS :=
endif

# --- sources -------------------------------------------------------------------
# Built twice: into build/obj for the shipped program and into build/obj-test with
# -DDD_TESTING, where job.c lists the test-only job kind and testhooks.c reads the
# test hooks (common/testhooks.h); nothing else differs between the two programs.
TWICE_SRCS := jobs/job.c common/testhooks.c
LIB_SRCS := $(filter-out $(TWICE_SRCS),$(wildcard common/*.c)) $(wildcard store/*.c) \
            jobs/events.c jobs/exec_local.c jobs/exec_slurm.c jobs/jobdir.c jobs/sched.c jobs/worker.c $(wildcard jobs/kind_*.c) \
            $(filter-out app/http/tls_shim.c,$(wildcard app/http/*.c)) $(wildcard app/api/*.c) \
            $(wildcard app/accounts/*.c) $(wildcard app/infer/*.c) \
            $(wildcard datasets/*.c) $(wildcard networks/*.c) $(wildcard networks/cpu/*.c)
MAIN_SRC := app/main.c $(wildcard app/cli/*.c)
NET_STD  := lenet alexnet googlenet resnet_small
UI_FILES := $(shell find ui -type f ! -name '.*' | sort)

LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
GEN_OBJS  := $(BUILD)/obj/gen/ui_assets.o $(BUILD)/obj/gen/openapi.o $(BUILD)/obj/gen/buildinfo.o \
             $(NET_STD:%=$(BUILD)/obj/gen/net_%.o)
SHIP_OBJS := $(LIB_OBJS) $(GEN_OBJS) $(TWICE_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_OBJS := $(LIB_OBJS) $(GEN_OBJS) $(TWICE_SRCS:%.c=$(BUILD)/obj-test/%.o) $(BUILD)/obj-test/jobs/testkind.o

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all run test asan fuzz fuzz-smoke kill-campaign bench clean deps deps-test cuda-check cuda
all: cuda-check $(BUILD)/deepdesk $(BUILD)/deepdesk-test $(CUDA_TARGETS) $(TLS_SHIMS)

# `make cuda`: the plugin alone (fails clearly where nvcc is missing)
cuda: $(CUDA_PLUGIN)

$(CUDA_PLUGIN): $(wildcard networks/cuda/*.cu) $(BUILD)/cuda/err.o networks/backend_impl.h networks/backend.h networks/net.h networks/ref.h common/err.h common/rng.h
	@mkdir -p $(dir $@)
	@test -n "$(NVCC)" || { echo "make cuda: no nvcc under $(CUDA_HOME) (set CUDA_HOME)"; exit 1; }
	@echo "  NVCC    $@"
	$(Q)$(NVCC) $(NVFLAGS) $(CUDA_ARCH) -shared -o $@ $(filter %.cu %.o,$^) $(CUDA_LIBS)

# The plugin's own copy of common/err.c (dd_err_set), position-independent and hidden.
$(BUILD)/cuda/err.o: common/err.c common/err.h
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) $(filter-out $(SANITIZE),$(CFLAGS)) -fPIC -fvisibility=hidden -c -o $@ $<

cuda-check:
	@echo "$(CUDA_SAY)"

$(BUILD)/deepdesk: $(SHIP_OBJS) $(MAIN_SRC:%.c=$(BUILD)/obj/%.o)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# The test build: the same program plus job kinds that exist only for tests.
$(BUILD)/deepdesk-test: $(TEST_OBJS) $(MAIN_SRC:%.c=$(BUILD)/obj/%.o)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# HTTPS: Debian's CivetWeb 1.15 dlopens "libssl.so"/"libcrypto.so" and wants
# OpenSSL 1.1's SSL_get_peer_certificate; these stand in for both names and bring
# OpenSSL 3 (app/http/tls_shim.c says how).  serve loads them only for --tls-cert.
# Never instrumented (make asan): -z defs refuses the sanitizer runtime's symbols.
$(BUILD)/tls/libssl.so: app/http/tls_shim.c
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(filter-out $(SANITIZE),$(CFLAGS)) -fPIC -fvisibility=hidden -shared -Wl,-soname,libssl.so -Wl,-z,defs -o $@ $< -lssl -lcrypto

$(BUILD)/tls/libcrypto.so:
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libcrypto.so -Wl,--no-as-needed -o $@ -lcrypto

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/obj-test/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (test build)"
	$(Q)$(CC) $(CFLAGS) -DDD_TESTING -c -o $@ $<

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -o $@ $<

$(BUILD)/gen/ui_assets.c: $(BUILD)/embed $(UI_FILES)
	@mkdir -p $(dir $@)
	@echo "  EMBED   ui/"
	$(Q)$(BUILD)/embed ui $@ ui $(UI_FILES)

$(BUILD)/gen/openapi.c: $(BUILD)/embed app/api/openapi.json
	@mkdir -p $(dir $@)
	@echo "  EMBED   app/api/openapi.json"
	$(Q)$(BUILD)/embed string $@ openapi_json app/api/openapi.json

# The standard networks, built in as C strings (networks/net.c: net_standards[]).
.PRECIOUS: $(BUILD)/gen/net_%.c
$(BUILD)/gen/net_%.c: $(BUILD)/embed networks/standard/%.prototxt
	@mkdir -p $(dir $@)
	@echo "  EMBED   networks/standard/$*.prototxt"
	$(Q)$(BUILD)/embed string $@ net_std_$* networks/standard/$*.prototxt

# Rewritten only when its content changes, so a new commit relinks and no more.
COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
$(BUILD)/gen/buildinfo.c: FORCE
	@mkdir -p $(dir $@)
	@printf 'const char dd_commit[] = "%s";\nconst char dd_build_date[] = "%s";\nconst int dd_cuda_built = %s;\n' \
		"$(COMMIT)" "$$(date -u +%Y-%m-%d)" "$(CUDA_BUILT)" > $@.new
	@cmp -s $@.new $@ && rm $@.new || mv $@.new $@
FORCE:

# --- tests ---------------------------------------------------------------------
$(BUILD)/tests/%: tests/unit/%.c $(TEST_OBJS) tests/unit/check.h
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -DDD_TESTING -o $@ $< $(TEST_OBJS) $(LDLIBS)

tests/node_modules/.package-lock.json: tests/package.json tests/package-lock.json
	cd tests && npm ci --no-audit --no-fund
	@touch $@

# --- the two commands ------------------------------------------------------------
deps:
	@tools/deps.sh $(RUN_PKGS)

deps-test:
	@tools/deps.sh $(TEST_PKGS)

run: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p data
	@echo "Starting deepdesk on http://127.0.0.1:5010/  (Ctrl-C stops it; data in ./data)"
	$(BUILD)/deepdesk serve --listen 127.0.0.1:5010 --data ./data

test: deps-test
	@$(MAKE) --no-print-directory all $(UNIT_BINS) tests/node_modules/.package-lock.json
	@tests/run.sh tests/check_map.sh $(UNIT_BINS)

# --- sanitizers ------------------------------------------------------------------
# The same sources in their own folder (the objects never mix with build/), without
# the CUDA plugin (nvcc code is not instrumented); the HTTPS shims are built as they
# are, uninstrumented.  ASAN_UNITS: all but
# test_cuda, which needs the plugin, and test_fmnist, whose 70,000-image dataset and
# LeNet epoch run code test_create, test_lmdbio and test_train already cover, in
# 75 s of the budget under ASan.  tests/asan.sh says which API suites run.
ASAN_BUILD := build-asan
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
ASAN_UNITS := $(filter-out test_cuda test_fmnist,$(UNIT_SRCS:tests/unit/%.c=%))

asan: deps-test tests/node_modules/.package-lock.json
	@$(MAKE) -s --no-print-directory BUILD=$(ASAN_BUILD) SANITIZE="$(ASAN_FLAGS)" CUDA_TARGETS= CUDA_BUILT=0 \
		$(ASAN_BUILD)/deepdesk $(ASAN_BUILD)/deepdesk-test $(ASAN_UNITS:%=$(ASAN_BUILD)/tests/%) \
		$(TLS_SHIMS:$(BUILD)/%=$(ASAN_BUILD)/%)
	@tests/asan.sh $(ASAN_UNITS:%=$(ASAN_BUILD)/tests/%)

# --- fuzzing ---------------------------------------------------------------------
# tests/fuzz/run.sh builds each target with clang into build/fuzz/ and runs it from
# its corpus there; a finding fails it and leaves the input beside it.  Each target
# also runs on seeded mutations inside `make test` (the unit test that includes it).
FUZZ_SECONDS ?= 120
fuzz: deps-test
	@$(MAKE) --no-print-directory all
	@tests/fuzz/run.sh $(FUZZ_SECONDS)

fuzz-smoke: deps-test
	@$(MAKE) --no-print-directory all
	@tests/fuzz/run.sh 10

KILL_ITERATIONS ?= 50
KILL_SEED ?= 1
kill-campaign: deps-test
	@$(MAKE) --no-print-directory all tests/node_modules/.package-lock.json
	@node tests/campaign/kill.mjs $(KILL_ITERATIONS) $(KILL_SEED)

bench: deps-test
	@$(MAKE) --no-print-directory all tests/node_modules/.package-lock.json
	@bench/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
