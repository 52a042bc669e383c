# kvfs - a FUSE-mounted KV-cache filesystem.
#
#   make            build/libkvfs.a, build/libkvfs.so, build/kvfsctl,
#                   build/kvfs-mount
#   make test       installs missing packages, builds under ASan + UBSan in
#                   build/asan and runs every test (unit, mount, python)
#   make demo       mounts kvfs on a temporary directory and runs a workload
#   make bench      benchmarks against tmpfs in the same run
#   make gpu-bundle build/gpu-bundle/: the GPU tests and benches with the
#                   libraries they load, for a bare GPU machine (run.sh)
#   make deps       apt-get the Debian packages the build and tests need
#   make install    PREFIX=/usr/local DESTDIR= SBINDIR=/sbin SYSCONFDIR=/etc
#   make uninstall  removes what make install wrote (same variables)
#
# Switches: SANITIZE=1 (address + undefined into build/asan),
#           SANITIZER=address|undefined|thread, CUDA=0|1 (default: auto),
#           V=1 (show commands), BUILD=dir.

PREFIX ?= /usr/local
DESTDIR ?=
# mount(8) looks for mount.<type> helpers in /sbin only, whatever PREFIX
SBINDIR ?= /sbin
CC ?= gcc
PKG_CONFIG ?= pkg-config

comma := ,
ifeq ($(SANITIZE),1)
SANITIZER := address,undefined
BUILD := build/asan
endif
BUILD ?= $(if $(SANITIZER),build/san,build)
SANFLAGS := $(if $(SANITIZER),-fsanitize=$(SANITIZER) -fno-omit-frame-pointer \
	$(if $(findstring undefined,$(SANITIZER)),-fno-sanitize-recover=undefined))

ifeq ($(V),1)
Q :=
msg = @true
else
Q := @
msg = @printf '  %-8s %s\n' $(1) $(2)
endif

# ---------------------------------------------------------------- CUDA
# Auto-detected: nvcc, or the CUDA headers under CUDA_HOME. CUDA=0 forces
# the host-only build. The runtime is loaded with dlopen, so no binary
# links libcudart.
CUDA_HOME ?= $(or $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null)),/usr/local/cuda)
ifeq ($(origin CUDA),undefined)
CUDA := $(if $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),1,0)
endif
NVCC ?= $(CUDA_HOME)/bin/nvcc
# No .cu sources today: gpu/gpu_cuda.c is C, compiled by $(CC) against the
# CUDA headers (static asserts there check gpu/gpu_rt.h's constants), and
# libcudart is dlopen'ed, so nvcc is not needed to build.

# ---------------------------------------------------------------- flags
DEPS_PKGS := fuse3 liburing libzstd libxxhash
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(DEPS_PKGS) 2>/dev/null)
CFLAGS ?= -O2 -g
WARN := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
	-Wmissing-prototypes -Wstrict-prototypes
ALL_CFLAGS := -std=gnu11 -D_GNU_SOURCE -fPIC -pthread $(WARN) $(CFLAGS) \
	$(SANFLAGS) -Iinclude -I. $(PKG_CFLAGS) -MMD -MP
LDFLAGS_ALL := $(SANFLAGS) -pthread $(LDFLAGS)
LIBS := -luring -lzstd -lxxhash -lhiredis -ldl -lm
# libxxhash's run-time dispatched XXH3 (hash/xxh_fast.h): Debian's amd64
# build exports it; against a libxxhash without it (DISPATCH=0 builds,
# or not yet installed), the compiled-in XXH3
XXH_DISPATCH := $(shell printf 'unsigned long long XXH3_64bits_dispatch(const void *, unsigned long);\nint main(void) { return !XXH3_64bits_dispatch("", 0); }\n' | \
	$(CC) -x c - -o /dev/null -lxxhash 2>/dev/null && echo 1)
ifneq ($(XXH_DISPATCH),1)
ALL_CFLAGS += -DKVFS_XXH_NO_DISPATCH
endif
FUSE_LIBS := $(shell $(PKG_CONFIG) --libs fuse3 2>/dev/null || echo -lfuse3)

# ---------------------------------------------------------------- sources
# gpu_rt.c (the dlopen loader, no CUDA headers) is always built: the client
# side opens CUDA IPC handles wherever the engine has CUDA.
GPU_SRC := gpu/gpu.c gpu/gpu_host.c gpu/gpu_rt.c
ifeq ($(CUDA),1)
GPU_SRC += $(if $(wildcard gpu/gpu_cuda.c),gpu/gpu_cuda.c,gpu/gpu_nocuda.c)
CUDA_CFLAGS := -I$(CUDA_HOME)/include
else
GPU_SRC += gpu/gpu_nocuda.c
CUDA_CFLAGS :=
endif

# libkvfs (lib/): the client library engines link, and only that: lib/*.c
# (the key derivation of kvfs.h section 1 and the calls of section 4) and
# gpu/gpu_rt.c (the dlopen loader of the CUDA runtime). Built with
# -fvisibility=hidden; the shared library exports exactly lib/libkvfs.map
# and the static one is one object whose only global symbols are the same
# list (objcopy --keep-global-symbols), so an engine's own tier_init or
# l2_open never collides. xxHash is compiled in, libc is all it needs.
LIB_SRC := $(wildcard lib/*.c) gpu/gpu_rt.c
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/libkvfs/%.o)
LIB_MAP := lib/libkvfs.map
LIB_SYMS := $(BUILD)/libkvfs.syms
LIB_SOVERSION := 0
# the newest version node of lib/libkvfs.map (KVFS_0.3)
LIB_VERSION := 0.3.0
LIB_CFLAGS := -fvisibility=hidden

# The engine (tier/ with its stores, gpu/, hash/): an internal archive
# linked into kvfs-mount, kvfsctl, the tests and the benches, never
# installed; it calls libkvfs for key derivation, so it links before it.
ENGINE_SRC := $(wildcard hash/*.c) $(wildcard tier/*.c) \
	$(wildcard tier/*/*.c) $(GPU_SRC)
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
ENGINE := $(BUILD)/libkvfsengine.a $(BUILD)/libkvfs.a
FS_SRC := $(wildcard fs/*.c) $(wildcard fs/*/*.c)
FS_OBJ := $(FS_SRC:%.c=$(BUILD)/%.o)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
INTEG_SRC := $(wildcard tests/integ/test_*.c)
TEST_COMMON_SRC := $(wildcard tests/common/*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
INTEG_BIN := $(INTEG_SRC:tests/integ/%.c=$(BUILD)/tests/integ/%)
TEST_COMMON_OBJ := $(TEST_COMMON_SRC:%.c=$(BUILD)/%.o)
GPU_TEST_SRC := $(wildcard tests/gpu/*.c)
GPU_TEST_BIN := $(GPU_TEST_SRC:tests/gpu/%.c=$(BUILD)/tests/gpu/%)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

# ---------------------------------------------------------------- events
# events/ (KV events over ZeroMQ, msgpack-c) is its own archive: linked
# into kvfs-mount, kvfsctl and the tests, never into libkvfs (engines that
# load libkvfs need no libzmq).
EV_PKGS := libzmq msgpack
EV_SRC := $(wildcard events/*.c)
EV_OBJ := $(EV_SRC:%.c=$(BUILD)/%.o)
EV_LIB := $(BUILD)/libkvfsev.a
EV_LIBS := $(shell $(PKG_CONFIG) --libs $(EV_PKGS) 2>/dev/null || echo -lzmq -lmsgpackc)
PROGS := $(BUILD)/kvfsctl $(BUILD)/kvfs-mount
LIBKVFS := $(BUILD)/libkvfs.a $(BUILD)/libkvfs.so $(BUILD)/kvfs.pc

# libkvfs_preload.so (lib/preload/): the opt-in LD_PRELOAD library that
# serves reads of chunks through one KVFS_IOC_GET (issue 26). Always built
# without sanitizers (it is preloaded into plain programs: cat, python3),
# from its own objects of the libkvfs files it calls; it exports only
# the libc calls of lib/preload/preload.map.
PRELOAD := $(BUILD)/libkvfs_preload.so
PRELOAD_SRC := $(wildcard lib/preload/*.c) lib/key.c lib/client_xfer.c \
	lib/client_buf.c
PRELOAD_OBJ := $(PRELOAD_SRC:%.c=$(BUILD)/preload/%.o)
PRELOAD_CFLAGS := $(filter-out $(SANFLAGS),$(ALL_CFLAGS)) -fvisibility=hidden

.PHONY: all tests test unit integ pytest deps check-deps demo bench install \
	deps-promtool \
	clean gpu-tests gpu-test

all: $(LIBKVFS) $(PROGS) $(PRELOAD)

tests: all $(UNIT_BIN) $(INTEG_BIN) $(BENCH_BIN) $(GPU_TEST_BIN)

$(BUILD)/%.o: %.c
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(if $(filter gpu/%,$<),$(CUDA_CFLAGS)) -c $< -o $@

$(EV_LIB): $(EV_OBJ)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/libkvfs/%.o: %.c
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) -c $< -o $@

$(BUILD)/preload/%.o: %.c
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(PRELOAD_CFLAGS) -c $< -o $@

$(PRELOAD): $(PRELOAD_OBJ) lib/preload/preload.map
	$(call msg,LD,$@)
	$(Q)$(CC) -shared -Wl,--version-script=lib/preload/preload.map \
	  -Wl,--no-undefined -pthread $(LDFLAGS) -o $@ $(PRELOAD_OBJ) -ldl

$(LIB_SYMS): $(LIB_MAP)
	@mkdir -p $(dir $@)
	$(Q)sed -n 's/^[[:space:]]*\(kvfs_[a-z0-9_]*\);.*/\1/p' $< > $@

$(BUILD)/libkvfsengine.a: $(ENGINE_OBJ)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/libkvfs.a: $(LIB_OBJ) $(LIB_SYMS)
	$(call msg,AR,$@)
	$(Q)$(LD) -r -o $(BUILD)/libkvfs/libkvfs.o $(LIB_OBJ)
	$(Q)objcopy --keep-global-symbols=$(LIB_SYMS) $(BUILD)/libkvfs/libkvfs.o
	$(Q)rm -f $@ && ar rcs $@ $(BUILD)/libkvfs/libkvfs.o

$(BUILD)/libkvfs.so: $(LIB_OBJ) $(LIB_MAP)
	$(call msg,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,libkvfs.so.$(LIB_SOVERSION) \
	  -Wl,--version-script=$(LIB_MAP) -Wl,--no-undefined $(LDFLAGS_ALL) \
	  -o $@ $(LIB_OBJ)
	$(Q)ln -sf libkvfs.so $(BUILD)/libkvfs.so.$(LIB_SOVERSION)

$(BUILD)/kvfs.pc: Makefile
	@mkdir -p $(dir $@)
	$(Q)printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' \
	  'includedir=$${prefix}/include' '' 'Name: kvfs' \
	  'Description: client library of kvfs, the KV-cache filesystem' \
	  'Version: $(LIB_VERSION)' 'Libs: -L$${libdir} -lkvfs' \
	  'Libs.private: -pthread' 'Cflags: -I$${includedir}' > $@
	$(Q)sed -e 's|^libdir=.*|libdir=$(abspath $(BUILD))|' \
	  -e 's|^includedir=.*|includedir=$(abspath include)|' $@ \
	  > $(BUILD)/kvfs-uninstalled.pc

CTL_SRC := mount/kvfsctl.c $(wildcard mount/ctl_*.c)
$(BUILD)/kvfsctl: $(CTL_SRC:%.c=$(BUILD)/%.o) $(EV_LIB) $(ENGINE)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(EV_LIBS) -ljansson $(LIBS)

MOUNT_OBJ := $(BUILD)/mount/kvfs_mount.o $(BUILD)/mount/mount_opts.o $(BUILD)/mount/mount_log.o \
	$(BUILD)/mount/mount_uring.o $(BUILD)/mount/mount_stop.o \
	$(BUILD)/mount/mount_events.o $(BUILD)/mount/mount_http.o $(BUILD)/mount/mount_dead.o
# -o metrics_http (mount/mount_http.c): libmicrohttpd
MHD_LIBS := $(shell $(PKG_CONFIG) --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
# sd_notify (Type=notify under systemd; a no-op without NOTIFY_SOCKET)
SD_LIBS := $(shell $(PKG_CONFIG) --libs libsystemd 2>/dev/null || echo -lsystemd)
$(BUILD)/kvfs-mount: $(MOUNT_OBJ) $(FS_OBJ) $(EV_LIB) $(ENGINE)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(FUSE_LIBS) $(EV_LIBS) $(MHD_LIBS) \
	  $(SD_LIBS) $(LIBS)

$(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(TEST_COMMON_OBJ) $(EV_LIB) $(ENGINE)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcmocka $(EV_LIBS) $(LIBS)

$(BUILD)/tests/integ/%: $(BUILD)/tests/integ/%.o $(TEST_COMMON_OBJ) $(EV_LIB) $(ENGINE)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcmocka $(EV_LIBS) $(LIBS)

$(BUILD)/tests/gpu/%: $(BUILD)/tests/gpu/%.o $(TEST_COMMON_OBJ) $(ENGINE)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcmocka $(LIBS)

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(ENGINE)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)
# the L3 bench starts its redis-servers and mounts with the test helpers
$(BUILD)/bench/kvfs_l3bench: $(TEST_COMMON_OBJ)
# kvfs_l2bench's parts (one file per table) under bench/l2bench/
$(BUILD)/bench/kvfs_l2bench: $(BUILD)/bench/kvfs_l2bench.o \
		$(patsubst %.c,$(BUILD)/%.o,$(wildcard bench/l2bench/*.c)) $(ENGINE)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)
# kvfs_l2churn empties its l2_dir with the tests' helper
$(BUILD)/bench/kvfs_l2churn: $(TEST_COMMON_OBJ)
# the hand-off bench too (two mounts, one redis-server or cluster)
$(BUILD)/bench/kvfs_hbench: $(TEST_COMMON_OBJ)
# kvfs_xbench (batched transfers) mounts with the tests' helper
$(BUILD)/bench/kvfs_xbench: $(TEST_COMMON_OBJ)

# kvfs_evbench mounts kvfs (tests/common's helpers) and talks ZeroMQ
$(BUILD)/bench/kvfs_evbench: $(BUILD)/bench/kvfs_evbench.o $(TEST_COMMON_OBJ) $(EV_LIB) $(ENGINE)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(EV_LIBS) $(LIBS)
# ---------------------------------------------------------------- load
# tests/load: the crash-consistency harness (make faults; 2 rounds in
# make test through tests/run.sh) and the soak (make soak), both driving
# kvfs_load.c's mixed load against a mounted kvfs.
FAULTS_ROUNDS ?= 20
SOAK_SECONDS ?= 600
LOAD_BIN := $(BUILD)/tests/load/kvfs_faults $(BUILD)/tests/load/kvfs_soak
$(LOAD_BIN): $(BUILD)/tests/load/%: $(BUILD)/tests/load/%.o \
		$(BUILD)/tests/load/kvfs_load.o $(BUILD)/tests/load/kvfs_pload.o \
		$(TEST_COMMON_OBJ)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)
tests: $(LOAD_BIN)
# the preload library's naming of path namespaces' files, tested alone
$(BUILD)/tests/unit/test_preload_path: $(BUILD)/tests/unit/test_preload_path.o \
		$(BUILD)/lib/preload/preload_path.o $(TEST_COMMON_OBJ)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcmocka $(LIBS)
# libkvfs's choice of the transfer ioctl's form: the daemon's answers
# are the test's (a daemon without the short form cannot run on this tree)
$(BUILD)/tests/unit/test_client_xfer: $(BUILD)/tests/unit/test_client_xfer.o \
		$(BUILD)/libkvfs.a
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -Wl,--wrap=ioctl -o $@ $^ -lcmocka $(LIBS)
# the rate limiter of the daemon's log, tested alone
$(BUILD)/tests/unit/test_mount_log: $(BUILD)/tests/unit/test_mount_log.o \
		$(BUILD)/mount/mount_log.o $(TEST_COMMON_OBJ)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcmocka $(FUSE_LIBS) $(LIBS)

.PHONY: faults soak
faults: check-deps
	$(Q)$(MAKE) --no-print-directory SANITIZE=1 all tests
	$(Q)KVFS_MOUNT_BIN=$$PWD/build/asan/kvfs-mount \
	  build/asan/tests/load/kvfs_faults -r $(FAULTS_ROUNDS)
soak: check-deps
	$(Q)$(MAKE) --no-print-directory all $(LOAD_BIN)
	$(Q)SOAK_SECONDS=$(SOAK_SECONDS) KVFS_MOUNT_BIN=$$PWD/$(BUILD)/kvfs-mount \
	  $(BUILD)/tests/load/kvfs_soak

# ---------------------------------------------------------------- fuzz
# libFuzzer targets (tests/fuzz/fuzz_*.c), one per parser of untrusted
# bytes, built with clang into build/fuzz (ASan + UBSan + the fuzzer's
# coverage), each with its seed corpus tests/fuzz/corpus/<target>/.
# `make fuzz FUZZ_SECONDS=N` runs each N seconds (new inputs go to
# build/fuzz/corpus/<target>, crashes to build/fuzz/crash-*); make test
# runs each for FUZZ_SMOKE_SECONDS through tests/run.sh.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_BUILD := build/fuzz
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
.PHONY: fuzz fuzz-build
fuzz-build:
	$(Q)$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) \
	  CUDA=0 SANITIZER= CFLAGS="-O1 -g -fno-omit-frame-pointer \
	  -fsanitize=fuzzer-no-link $(FUZZ_SAN)" \
	  LDFLAGS="$(FUZZ_SAN)" fuzz-bins
fuzz-bins: $(FUZZ_BIN)
$(FUZZ_BUILD)/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(FS_OBJ) \
		$(CTL_SRC:%.c=$(BUILD)/%.o) $(BUILD)/mount/mount_log.o \
		$(BUILD)/mount/mount_events.o $(BUILD)/mount/mount_http.o \
		$(EV_LIB) $(ENGINE)
	$(call msg,LD,$@)
	$(Q)$(CC) -fsanitize=fuzzer $(LDFLAGS_ALL) -o $@ \
	  $(filter-out %/kvfsctl.o,$^) $(FUSE_LIBS) $(EV_LIBS) -ljansson \
	  $(MHD_LIBS) $(SD_LIBS) $(LIBS)
fuzz: check-deps
	$(Q)$(MAKE) --no-print-directory fuzz-build
	$(Q)FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz/run.sh $(FUZZ_BUILD)

# ---------------------------------------------------------------- gpu
# libfakecudart.so stands in for libcudart (KVFS_CUDART=...) so the pinned
# and cuda backends and CUDA handles are tested on machines without a GPU;
# built plain (no sanitizer, no CUDA headers) and never installed.
FAKECUDART := $(BUILD)/tests/gpu/libfakecudart.so
$(FAKECUDART): tests/gpu/fake/fakecudart.c
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=gnu11 -O1 -g -fPIC -shared -pthread -Wall -Wextra -Werror \
	  -o $@ $<
tests: $(FAKECUDART)

# kvfs_devcheck: a CUDA C++ engine-side check (a kernel compares chunk bytes
# on the device), built with nvcc where CUDA=1 and nvcc exists, linked with
# $(CC) so sanitizer builds link too. It links libcudart itself (it is a
# test program; libkvfs still does not), found first in ../lib/cuda beside
# it (make gpu-bundle's copy), then in the toolkit's.
NVCC_OK := $(and $(filter 1,$(CUDA)),$(wildcard $(NVCC)))
DEVCHECK := $(if $(NVCC_OK),$(BUILD)/tests/gpu/kvfs_devcheck)
$(BUILD)/tests/gpu/kvfs_devcheck.o: tests/gpu/cuda/kvfs_devcheck.cu include/kvfs.h
	$(call msg,NVCC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC) -O2 -std=c++17 -Iinclude -I. -c $< -o $@
$(BUILD)/tests/gpu/kvfs_devcheck: $(BUILD)/tests/gpu/kvfs_devcheck.o $(ENGINE)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS) -L$(CUDA_HOME)/lib64 \
	  -Wl,-rpath,'$$ORIGIN/../lib/cuda:$(CUDA_HOME)/lib64' -lcudart -lstdc++
tests: $(DEVCHECK)

# The GPU tests, then the GPU benchmark, on this build (each skips with 77,
# saying why, without a GPU): `make gpu-test` on a GPU machine.
GPU_BENCH := $(BUILD)/bench/kvfs_gpubench
gpu-test gpu-tests: all $(GPU_TEST_BIN) $(FAKECUDART) $(BUILD)/tests/unit/test_gpu \
		$(GPU_BENCH) $(DEVCHECK)
	$(Q)for t in $(BUILD)/tests/unit/test_gpu $(GPU_TEST_BIN) $(GPU_BENCH); do \
	  echo "=== $$t"; KVFS_BUILD=$(BUILD) KVFS_MOUNT_BIN=$$PWD/$(BUILD)/kvfs-mount \
	  timeout -k 10 300 $$t; rc=$$?; [ $$rc = 0 ] || [ $$rc = 77 ] || exit $$rc; \
	done

# ---------------------------------------------------------------- gpu-bundle
# build/gpu-bundle/: what a GPU machine that has only the NVIDIA driver,
# CUDA and no Debian package needs to run the GPU tests and benches in one
# command (run.sh OUTDIR): this plain build made with CUDA, the shared
# libraries it loads (copied from this machine, glibc excepted),
# fusermount3, and kvfs_cudacheck (which runtime, driver and devices a
# machine gives kvfs). tests/gpu/bundle/mkbundle.sh assembles it and writes
# its MANIFEST (the glibc it needs); tests/gpu/bundle/README is its manual.
GPU_BUNDLE ?= build/gpu-bundle
CUDACHECK := $(BUILD)/tests/gpu/bundle/kvfs_cudacheck
$(CUDACHECK): $(BUILD)/tests/gpu/bundle/kvfs_cudacheck.o $(ENGINE)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)
tests: $(CUDACHECK)
BUNDLE_IN := $(PROGS) $(BUILD)/libkvfs.so $(GPU_TEST_BIN) $(FAKECUDART) \
	$(BUILD)/tests/unit/test_gpu $(GPU_BENCH) $(BUILD)/bench/kvfs_bench \
	$(BUILD)/bench/kvfs_xbench $(DEVCHECK) $(CUDACHECK) \
	$(addprefix $(BUILD)/bench/,kvfs_ibench kvfs_l2bench kvfs_l3bench \
	kvfs_pbench) $(BUILD)/libkvfs_preload.so
.PHONY: gpu-bundle
ifeq ($(CUDA)$(SANITIZER),1)
gpu-bundle: $(BUNDLE_IN)
	$(call msg,BUNDLE,$(GPU_BUNDLE))
	$(Q)bash tests/gpu/bundle/mkbundle.sh $(BUILD) $(GPU_BUNDLE) $(CUDA_HOME)
else
gpu-bundle:
	@echo "make gpu-bundle: needs a plain build (no SANITIZE) with CUDA (the" \
	  "toolkit under CUDA_HOME=$(CUDA_HOME)); this one has CUDA=$(CUDA)" \
	  "SANITIZER=$(SANITIZER)" >&2; exit 1
endif

# ---------------------------------------------------------------- deps
APT_PKGS := build-essential pkg-config libfuse3-dev fuse3 liburing-dev \
	libzstd-dev libxxhash-dev libcmocka-dev attr python3 python3-numpy \
	util-linux
# issue 25: `pip install ./python` offline (setuptools, wheel) and its test
APT_PKGS += python3-setuptools python3-wheel python3-venv python3-pip
# L3 (issue 16): hiredis, and the servers the L3 tests start on loopback
APT_PKGS += libhiredis-dev redis-server redis-tools
# events (issue 13): ZeroMQ, msgpack-c, jansson (kvfsctl events --json),
# the Python subscriber's modules, inotifywait for the delete-event test
APT_PKGS += libzmq3-dev libmsgpack-dev libjansson-dev python3-zmq \
	python3-msgpack inotify-tools
# issue 12: libFuzzer (make fuzz), fio (the fio job test)
APT_PKGS += clang libfuzzer-14-dev fio
# issue 17: -o metrics_http (libmicrohttpd), its test (curl), the control
# files' copy test (rsync). promtool (Debian's prometheus, ~96 MB with the
# server) is not installed by default: `make deps-promtool` adds it, and
# the metrics test then runs `promtool check metrics` (else it says so).
APT_PKGS += libmicrohttpd-dev curl rsync
deps-promtool:
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus
# issue 17: sd_notify for kvfs@.service; systemd-analyze verify and man(1)
# in the install test
APT_PKGS += libsystemd-dev systemd man-db
# issue 17: tmux (kvfsctl top's test drives it in a real terminal);
# libjansson-dev above is also kvfsctl's JSON in and out
APT_PKGS += tmux
# APT_GET: tests/sh/test_make_fresh.sh stands a fake in for it
APT_GET ?= apt-get
deps:
	$(APT_GET) update
	DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y $(APT_PKGS)

# Installs packages only when something is missing.
check-deps:
	@$(PKG_CONFIG) --exists $(DEPS_PKGS) cmocka hiredis 2>/dev/null && \
	  command -v redis-server >/dev/null && command -v redis-cli >/dev/null && \
	  $(PKG_CONFIG) --exists $(EV_PKGS) jansson libsystemd 2>/dev/null && \
	  command -v inotifywait >/dev/null && \
	  /usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null && \
	  /usr/bin/python3 -c 'import setuptools, wheel, ensurepip' 2>/dev/null && \
	  command -v fusermount3 >/dev/null && command -v getfattr >/dev/null && \
	  command -v clang >/dev/null && command -v fio >/dev/null && \
	  $(PKG_CONFIG) --exists libmicrohttpd 2>/dev/null && \
	  command -v curl >/dev/null && command -v rsync >/dev/null && \
	  command -v tmux >/dev/null && command -v man >/dev/null && \
	  command -v systemd-analyze >/dev/null && \
	  [ -x /usr/bin/python3 ] || $(MAKE) --no-print-directory deps

# ---------------------------------------------------------------- test
test: check-deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory SANITIZE=1 tests
	$(Q)$(MAKE) --no-print-directory fuzz-build
	$(Q)BUILD=build/asan PLAIN_BUILD=build bash tests/run.sh

# Targets that may install packages build in a sub-make after check-deps:
# this make read pkg-config's flags when it started, maybe before the
# packages were there (tests/sh/test_make_fresh.sh).
demo: check-deps
	$(Q)$(MAKE) --no-print-directory all $(BUILD)/bench/kvfs_demo
	$(Q)bash bench/demo.sh $(BUILD)

bench: check-deps
	$(Q)$(MAKE) --no-print-directory all tests
	$(Q)bash bench/run.sh $(BUILD)

# ---------------------------------------------------------------- install
# Every file install writes is in INSTALLED, and uninstall removes exactly
# those (and DOCDIR, ours alone); directories shared with other packages
# stay. Python: PYTHONDIR is the dist-packages directory Debian's python3
# searches for PREFIX=/usr or /usr/local; for another PREFIX, put it on
# PYTHONPATH (kvfs(7)). The package goes to PYTHONDIR/kvfs/; its installed
# _client.py loads $(PREFIX)/lib/libkvfs.so.0 by default.
BINDIR := $(PREFIX)/bin
LIBDIR := $(PREFIX)/lib
MANDIR := $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/kvfs
SYSCONFDIR ?= /etc
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
FUSERMOUNT ?= /usr/bin/fusermount3
PYTHON ?= /usr/bin/python3
PYTHONDIR ?= $(shell $(PYTHON) -c 'import sys; p = sys.argv[1]; \
  print("/usr/lib/python3/dist-packages" if p == "/usr" else \
  "%s/lib/python%d.%d/dist-packages" % ((p,) + sys.version_info[:2]))' \
  '$(PREFIX)' 2>/dev/null || echo '$(PREFIX)/lib/python3/dist-packages')
INSTALLED = $(BINDIR)/kvfs-mount $(BINDIR)/kvfsctl $(LIBDIR)/libkvfs.a \
	$(LIBDIR)/libkvfs.so.0 $(LIBDIR)/libkvfs.so $(LIBDIR)/pkgconfig/kvfs.pc \
	$(LIBDIR)/libkvfs_preload.so \
	$(PREFIX)/include/kvfs.h $(MANDIR)/man1/kvfsctl.1 $(MANDIR)/man7/kvfs.7 \
	$(MANDIR)/man8/kvfs-mount.8 $(MANDIR)/man8/mount.kvfs.8 \
	$(MANDIR)/man8/mount.fuse.kvfs.8 $(SBINDIR)/mount.kvfs \
	$(SBINDIR)/mount.fuse.kvfs $(SYSTEMDUNITDIR)/kvfs@.service \
	$(DOCDIR)/kvfs.conf.example $(addprefix $(PYTHONDIR)/kvfs/,$(PY_FILES))
PY_FILES = __init__.py _client.py _abi.py _buffer.py _handle.py
SUBST = sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
	-e 's|@FUSERMOUNT@|$(FUSERMOUNT)|g'

.PHONY: uninstall
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) \
	  $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7 \
	  $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(SYSTEMDUNITDIR) \
	  $(DESTDIR)$(DOCDIR) $(DESTDIR)$(PYTHONDIR)/kvfs
	install -m 755 $(BUILD)/kvfs-mount $(BUILD)/kvfsctl $(DESTDIR)$(BINDIR)/
	install -m 644 $(BUILD)/libkvfs.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/libkvfs.so $(DESTDIR)$(LIBDIR)/libkvfs.so.0
	ln -sf libkvfs.so.0 $(DESTDIR)$(LIBDIR)/libkvfs.so
	install -m 755 $(PRELOAD) $(DESTDIR)$(LIBDIR)/
	sed 's|^prefix=.*|prefix=$(PREFIX)|' $(BUILD)/kvfs.pc > $(DESTDIR)$(LIBDIR)/pkgconfig/kvfs.pc
	install -m 644 include/kvfs.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 man/kvfsctl.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 man/kvfs.7 $(DESTDIR)$(MANDIR)/man7/
	install -m 644 man/kvfs-mount.8 $(DESTDIR)$(MANDIR)/man8/
	printf '.so man8/kvfs-mount.8\n' > $(DESTDIR)$(MANDIR)/man8/mount.kvfs.8
	printf '.so man8/kvfs-mount.8\n' > $(DESTDIR)$(MANDIR)/man8/mount.fuse.kvfs.8
	ln -sf $(BINDIR)/kvfs-mount $(DESTDIR)$(SBINDIR)/mount.kvfs
	ln -sf $(BINDIR)/kvfs-mount $(DESTDIR)$(SBINDIR)/mount.fuse.kvfs
	$(SUBST) systemd/kvfs@.service.in > $(DESTDIR)$(SYSTEMDUNITDIR)/kvfs@.service
	chmod 644 $(DESTDIR)$(SYSTEMDUNITDIR)/kvfs@.service
	$(SUBST) systemd/kvfs.conf.example > $(DESTDIR)$(DOCDIR)/kvfs.conf.example
	chmod 644 $(DESTDIR)$(DOCDIR)/kvfs.conf.example
	install -m 644 python/kvfs/__init__.py python/kvfs/_abi.py \
	  python/kvfs/_buffer.py python/kvfs/_handle.py \
	  $(DESTDIR)$(PYTHONDIR)/kvfs/
	sed 's|^_INSTALLED_LIB = None$$|_INSTALLED_LIB = "$(LIBDIR)/libkvfs.so.0"|' \
	  python/kvfs/_client.py > $(DESTDIR)$(PYTHONDIR)/kvfs/_client.py
	chmod 644 $(DESTDIR)$(PYTHONDIR)/kvfs/_client.py

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	rm -f $(addprefix $(DESTDIR)$(PYTHONDIR)/kvfs/__pycache__/, \
	  $(PY_FILES:.py=.*.pyc))
	rmdir $(DESTDIR)$(PYTHONDIR)/kvfs/__pycache__ 2>/dev/null || true
	rmdir $(DESTDIR)$(PYTHONDIR)/kvfs 2>/dev/null || true
	rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null || true

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
