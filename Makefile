# Thin wrapper over CMake: `make demo` and `make test` work on a fresh Debian 12 machine as root.
# Each installs the Debian packages it needs when missing, configures, builds, then runs.

BUILD   ?= build
JOBS    ?= $(shell nproc)
# ctest runs one test more than there are cores: the tests that run side by side (tests/CMakeLists.txt,
# "what may run side by side") wait in MPI, in process start-up and in files much of their time,
# so at -j 2 the 2-core machine's CPUs were 75-82% busy and at -j 3 94% (their part of the suite
# 379 -> 332 s). The tests that run alone still run alone.
TEST_JOBS ?= $(shell echo $$(( $(JOBS) + 1 )))
CMAKE_FLAGS ?=
NP      ?= 2
PREFIX  ?= /usr/local

# Debian packages the build needs (the CUDA toolkit is optional, found at /usr/local/cuda): all that
# `make install`, `make demo` and a plain `make` install when missing.
DEB_PKGS := cmake make gcc pkg-config openmpi-bin libopenmpi-dev libpmix-dev libhwloc-dev \
            libopenblas-dev zlib1g-dev libturbojpeg0-dev libpng-dev
# What the tests need besides (`make deps`, run by `make test` and the other test targets): cmocka
# (unit tests), SLURM with munge, iproute2, util-linux and procps (the local test cluster and its
# faults); clang, libclang-rt-14-dev (libFuzzer and the sanitizer runtimes) and llvm (llvm-symbolizer,
# for readable stack traces) build and run the fuzz harnesses of tests/fuzz/. doxygen: make docs.
# gnuplot-nox: dtrain plot. g++: the C++ project of tests/package built against the installed package.
DEB_TEST_PKGS := g++ libcmocka-dev slurmctld slurmd slurm-client munge iproute2 util-linux procps \
                 clang libclang-rt-14-dev llvm doxygen gnuplot-nox

# $(call apt_missing,PACKAGES): installs those of PACKAGES that are not installed (as root), and
# reconfigures an existing build directory after, so that what it found missing (cmocka: the unit
# tests; doxygen) is found now. Where it cannot (no dpkg-query: not Debian, or the dependencies come
# from Spack or modules; or not root) it says so and goes on: CMake's configure is what decides,
# and it names any dependency it does not find. So `make install PREFIX=~/sw/dtrain` works as any
# user wherever the dependencies are present.
define apt_missing
@if ! command -v dpkg-query > /dev/null; then \
	  echo "note: no dpkg-query (not a Debian system): the Debian packages are not checked; CMake says what is missing"; \
	  exit 0; \
	fi; \
	missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" -ne 0 ]; then \
	    echo "note: Debian packages not installed:$$missing; not root, so not installing them (sudo apt-get install -y$$missing); going on: CMake says what the build lacks" >&2; \
	    exit 0; \
	  fi; \
	  echo "installing missing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing || exit 1; \
	  if [ -f $(BUILD)/CMakeCache.txt ]; then cmake -S . -B $(BUILD) > /dev/null || exit 1; fi; \
	fi
endef

# Open MPI refuses to run as root without these; tests and the demo run as whoever calls make.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
# Ranks that yield when idle do not starve each other when there are more ranks than cores, and a
# machine with fewer cores than NP may still run the demo.
export OMPI_MCA_mpi_yield_when_idle := 1
export OMPI_MCA_rmaps_base_oversubscribe := 1

.PHONY: all deps build-deps configure build demo test test-tsan test-asan soak install docs fuzz format clean

all: build

# Everything: the build's packages and the tests'.
deps:
	$(call apt_missing,$(DEB_PKGS) $(DEB_TEST_PKGS))

build-deps:
	$(call apt_missing,$(DEB_PKGS))

# The packages before cmake looks for them (order-only: installing them does not reconfigure).
$(BUILD)/CMakeCache.txt: | build-deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: build-deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The main job on its built-in default: 2 ranks train the mlp on synthetic data; the loss falls.
demo: build
	mpirun -np $(NP) $(BUILD)/dtrain env
	mpirun -np $(NP) $(BUILD)/dtrain train --model mlp --batch 64 --steps 150 --lr 0.05 --log-every 15

# deps first, then the build (a make -j would otherwise configure before cmocka is installed).
test: deps
	$(MAKE) build
	ctest --test-dir $(BUILD) --output-on-failure -j $(TEST_JOBS)

# Headers, libdtrain.so/.a, the command, the sbatch templates, the CMake package and dtrain.pc under
# PREFIX (cmake/install.cmake lists them). Any user, for a PREFIX they can write. The list of what it
# installed is $(BUILD)/install_manifest.txt; to uninstall: xargs -d '\n' rm -f -- < $(BUILD)/install_manifest.txt
# (docs/library-guide.md, "Install and use as a package").
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The API reference from the public headers' comments: $(BUILD)/docs/html/index.html. Fails on any
# Doxygen warning (an undocumented function, field or value).
docs: deps
	$(MAKE) configure
	cmake --build $(BUILD) --target docs

# libFuzzer harnesses (tests/fuzz/): built with clang + ASan + UBSan in their own build directory,
# each run FUZZ_SECONDS on its seed corpus; any report fails. `make test` runs them for 1 s each
# (ctest's fuzz.harnesses sets FUZZ_SECONDS=1, tests/CMakeLists.txt).
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(JOBS) tests/fuzz/run.sh $(FUZZ_BUILD)

# The fault soak, long (tests/slurm/soak.sh, as root): 6 ranks on a 3-node local SLURM cluster
# under a seeded chaos loop of preemptions, stopped and killed ranks and damaged checkpoints, in
# SOAK_ROUNDS rounds of one fault of each kind (empty: SOAK_SECONDS / 30), none sent after
# SOAK_SECONDS; the end must equal an undisturbed run bit for bit. `make test` runs the short
# version (ctest slurm.soak: 1 round).
SOAK_SECONDS ?= 600
SOAK_SEED    ?= 1
SOAK_ROUNDS  ?=
soak: deps
	$(MAKE) build
	SOAK_ROUNDS=$(SOAK_ROUNDS) bash tests/slurm/soak.sh $(SOAK_SEED) $(SOAK_SECONDS) $(BUILD)/dtrain

# ThreadSanitizer over the communication engine, the reducer and a 2-rank train, in a CPU build of
# its own (every layer but kernels/ instrumented: CMakeLists.txt says why). Not part of `make test`
# (CI runs it after): the instrumented build and runs take about 3 minutes on 2 cores.
TSAN_BUILD ?= build-tsan
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DDTRAIN_CUDA=OFF -DDTRAIN_SANITIZE=thread $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	tests/sanitizers/run_tsan.sh $(TSAN_BUILD)

# valgrind memcheck over every unit test and a 3-step 2-rank `dtrain train` (one log per rank), in
# a plain -O1 -g CPU build of its own; fails on any error or definite leak that
# tests/sanitizers/valgrind.supp (Open MPI, PMIx and Omni-Path libraries only) does not name. Not
# part of `make test` (CI runs it after, .ci/run): 3.5 minutes of runs on 2 cores, 8 minutes from
# nothing on a loaded machine.
VALGRIND_BUILD ?= build-valgrind
.PHONY: test-valgrind
test-valgrind: deps
	@command -v valgrind > /dev/null || { [ "$$(id -u)" -eq 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind; } || \
	  { echo "error: valgrind missing: sudo apt-get install -y valgrind" >&2; exit 1; }
	cmake -S . -B $(VALGRIND_BUILD) -DDTRAIN_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="-O1 -g" $(CMAKE_FLAGS)
	cmake --build $(VALGRIND_BUILD) -j $(JOBS)
	tests/sanitizers/run_valgrind.sh $(VALGRIND_BUILD)

# AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer over every unit and multi-rank test
# (ctest -L unit and -L mpi), in a CPU build of its own with every layer instrumented; any report
# fails, leaks inside Open MPI aside (tests/sanitizers/lsan.supp). Not part of `make test` (CI runs
# it after, .ci/run): on 2
# cores the build takes 1.5 minutes and the tests 7.5 (mpi.train and mpi.amp left out, 10+
# minutes each; ASAN_EXCLUDE= runs them too: tests/sanitizers/run_asan.sh).
ASAN_BUILD ?= build-asan
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DDTRAIN_CUDA=OFF -DDTRAIN_SANITIZE=address $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	tests/sanitizers/run_asan.sh $(ASAN_BUILD)

# cppcheck over dtrain's own C sources (base/, runtime/, collectives/, kernels/, launch/, examples/;
# not tests/), with the flags of a CPU build's compile_commands.json ($(ANALYZE_BUILD), configured,
# never built). Fails on any report: each one triaged as false is suppressed where it stands, with
# why (/* cppcheck-suppress ID ; why */), and --enable=information reports a suppression that no
# longer matches. Not part of `make test`: about 35 s from nothing on 2 cores (docs/testing.md). The
# project file by its absolute path: cppcheck matches no --file-filter against a relative one's files.
ANALYZE_BUILD ?= build-analyze
.PHONY: analyze
analyze: build-deps
	$(call apt_missing,cppcheck)
	cmake -S . -B $(ANALYZE_BUILD) -DDTRAIN_CUDA=OFF -DBUILD_TESTING=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
	  $(CMAKE_FLAGS) > /dev/null
	mkdir -p $(ANALYZE_BUILD)/cppcheck
	cppcheck --project=$(abspath $(ANALYZE_BUILD))/compile_commands.json --cppcheck-build-dir=$(ANALYZE_BUILD)/cppcheck \
	  $(foreach d,base runtime collectives kernels launch examples,--file-filter='$(CURDIR)/$(d)/*') \
	  --enable=warning,portability,performance,information --inline-suppr --error-exitcode=1 -q -j $(JOBS)

# The house style (.clang-format) on every C, CUDA and header file of the tree.
format:
	git ls-files '*.c' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD) $(TSAN_BUILD) $(ASAN_BUILD) $(ANALYZE_BUILD)
