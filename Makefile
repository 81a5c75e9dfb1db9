# powerfs - see README.md.  `make` builds ./powerfs, `make check` runs every test.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
UNITDIR ?= /lib/systemd/system
DESTDIR ?=
PYTHON ?= /usr/bin/python3
VERSION := 0.1.0

CC ?= gcc
PKGS := fuse3 glib-2.0 gio-2.0 gio-unix-2.0 libsystemd
CFLAGS ?= -O2 -g
WARN := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CPPFLAGS += -D_GNU_SOURCE -DG_LOG_DOMAIN='"powerfs"' -DG_LOG_USE_STRUCTURED -DPOWERFS_VERSION='"$(VERSION)"' -Iinclude

# make SANITIZE=1: AddressSanitizer + UBSan, in a separate build directory.
ifeq ($(SANITIZE),1)
BUILD := build/sanitize
CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
else
BUILD := build/default
endif

PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS))

# Sources by layer (src/LAYER/NAME.c), main.c at the top.
CORE := engine/clock engine/events engine/wakeup engine/wakeup-reason engine/wakelock engine/suspend engine/autosleep engine/power backends/simulate
DAEMON := $(CORE) records/journal backends/host-power backends/sysfs backends/logind backends/freeze records/state-file records/metrics sysfs/caps sysfs/attrs sysfs/owners transport/loop-hold transport/inflight transport/mount transport/loop-lock transport/readers transport/take-over transport/open-files transport/refuse transport/session sysfs/fs sysfs/class-wakeup transport/keeper records/log status config server keeper-role main
UNIT_TESTS := test-wakeup test-wakeup-reason test-wakelock test-autosleep test-metrics test-inflight test-session

core_objs = $(patsubst %,$(BUILD)/%.o,$(CORE))
daemon_objs = $(patsubst %,$(BUILD)/%.o,$(DAEMON))

all: powerfs powerfs-report

powerfs: $(BUILD)/powerfs
	cp -f $< $@

# The journal report tool: Python 3, standard library only.
powerfs-report: src/powerfs-report.py
	sed '1s|^#!.*|#!$(PYTHON)|' $< > $@.tmp
	chmod 0755 $@.tmp
	mv -f $@.tmp $@

$(BUILD)/powerfs: $(daemon_objs)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/%.o: src/%.c Makefile
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/test-%: tests/unit/test-%.c $(core_objs) | $(BUILD)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(PKG_CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The Prometheus text is drawn from the core alone.
$(BUILD)/test-metrics: $(BUILD)/records/metrics.o
$(BUILD)/test-inflight: $(BUILD)/transport/inflight.o
# A fake kernel against the take-over of a connection.
$(BUILD)/test-session: $(BUILD)/transport/mount.o $(patsubst %,$(BUILD)/transport/%.o,loop-lock readers take-over open-files session) $(BUILD)/transport/inflight.o $(BUILD)/transport/loop-hold.o

$(BUILD):
	mkdir -p $@

# libFuzzer harnesses (clang), each run with e.g.
#   mkdir -p build/fuzz/corpus-fs
#   build/fuzz/fuzz-fs -max_total_time=600 build/fuzz/corpus-fs fuzz/corpus-fs
# libFuzzer writes what it finds into the first directory (under build/),
# and reads the committed corpus from the others.
# fuzz-store: every store and show handler of the attribute table;
# fuzz-fs, fuzz-class-wakeup: the request handlers of fs.c and
# class-wakeup.c, fed requests as the kernel sends them (fuzz/fuse-fake.h
# plays the kernel and libfuse); fuzz-state-file: the state-file loader.
FUZZERS := fuzz-store fuzz-fs fuzz-class-wakeup fuzz-state-file
FUZZ_CORE := $(patsubst %,src/%.c,$(CORE) sysfs/caps backends/host-power sysfs/attrs sysfs/owners)
HEADERS = $(wildcard include/powerfs/*.h include/powerfs/*/*.h)
FUZZ_LIBS = $(shell pkg-config --libs glib-2.0 gio-2.0 gio-unix-2.0)
FUZZ_CC = clang $(CPPFLAGS) -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined \
	-Wall -Wextra -Werror -Wno-unused-function $(PKG_CFLAGS)
fuzz: $(patsubst %,build/fuzz/%,$(FUZZERS))
build/fuzz/fuzz-store: fuzz/fuzz-store.c $(FUZZ_CORE) $(HEADERS)
	mkdir -p build/fuzz
	$(FUZZ_CC) -o $@ $(FUZZ_CORE) fuzz/fuzz-store.c $(FUZZ_LIBS)
build/fuzz/fuzz-fs: fuzz/fuzz-fs.c fuzz/fuse-fake.h src/sysfs/fs.c $(FUZZ_CORE) $(HEADERS)
	mkdir -p build/fuzz
	$(FUZZ_CC) -o $@ $(FUZZ_CORE) fuzz/fuzz-fs.c $(FUZZ_LIBS)
build/fuzz/fuzz-class-wakeup: fuzz/fuzz-class-wakeup.c fuzz/fuse-fake.h src/sysfs/class-wakeup.c $(FUZZ_CORE) $(HEADERS)
	mkdir -p build/fuzz
	$(FUZZ_CC) -o $@ $(FUZZ_CORE) fuzz/fuzz-class-wakeup.c $(FUZZ_LIBS)
build/fuzz/fuzz-state-file: fuzz/fuzz-state-file.c src/records/state-file.c $(FUZZ_CORE) $(HEADERS)
	mkdir -p build/fuzz
	$(FUZZ_CC) -o $@ $(FUZZ_CORE) src/records/state-file.c fuzz/fuzz-state-file.c $(FUZZ_LIBS)

deps:
	scripts/install-deps.sh

unit: $(patsubst %,$(BUILD)/%,$(UNIT_TESTS))
	@for t in $^; do echo "== $$t"; ./$$t || exit 1; done

# The README's test command.  Runs the unit tests, then the black-box suite on
# real mounts (as root).
check: deps
	$(MAKE) check-layers lint analyze
	$(MAKE) $(BUILD)/powerfs powerfs-report unit check-names
	POWERFS=$(CURDIR)/$(BUILD)/powerfs $(PYTHON) -m pytest -q tests

# The naming rule of include/powerfs/README, over the names the objects
# export.
check-names: $(BUILD)/powerfs
	$(PYTHON) scripts/check-names $(BUILD) $(daemon_objs)

# The layers of src/ and include/powerfs/: who may include whom, and no
# include cycle (the rules are in the script).
check-layers:
	$(PYTHON) scripts/check-layers

# The linters (scripts/install-deps.sh installs them).
SHELL_SCRIPTS := scripts/check-under-load scripts/install-deps.sh \
	scripts/powerfs-container scripts/valgrind-check scripts/vm/build-image \
	scripts/vm/guest/boot.sh scripts/vm/guest/sleep-hook
PYTHON_SCRIPTS := tests src/powerfs-report.py scripts/check-layers \
	scripts/check-names \
	scripts/adversary scripts/bench scripts/bench-freeze scripts/bench-open \
	scripts/bench-state-file scripts/crash-stress scripts/gen-journal \
	scripts/vm/guest/checks.py scripts/vm/guest/crash-stress scripts/vm/run
# The C sources against .clang-format (the kernel's style); `make format`
# applies it.
C_SOURCES = $(shell git ls-files 'src/*.c' 'src/*.h' 'include/*.h' \
	'tests/unit/*.c' 'fuzz/*.c' 'fuzz/*.h' 2>/dev/null)
lint:
	clang-format --dry-run -Werror $(C_SOURCES)
	shellcheck $(SHELL_SCRIPTS)
	pyflakes3 $(PYTHON_SCRIPTS)
format:
	clang-format -i $(C_SOURCES)

# GCC's static analyzer over every source file: no finding, or one
# silenced where it is found with the reason beside it.
analyze:
	@for f in $(patsubst %,src/%.c,$(DAEMON)); do \
		echo "analyze $$f"; \
		$(CC) $(CPPFLAGS) $(WARN) -O0 -fanalyzer $(PKG_CFLAGS) \
			-c -o /dev/null $$f || exit 1; \
	done

# The real-system test: a Debian 12 VM (qemu, software emulation) with systemd,
# logind, D-Bus and polkit that really suspends; the host never sleeps.  Builds
# the guest image once (build/vm/, 1.5 to 6 minutes here, needs a Debian
# mirror), then boots it and runs the checks of scripts/vm/guest/checks.py,
# then the pytest modules of scripts/vm/guest/pytest-modules on its kernel.
check-vm:
	scripts/install-deps.sh --vm
	$(MAKE) powerfs powerfs-report
	$(PYTHON) scripts/vm/run $(VM_ARGS)

run:
	scripts/install-deps.sh --run
	$(MAKE) powerfs
	mkdir -p /run/power
	./powerfs -f /run/power

install: powerfs powerfs-report
	install -D -m 0755 powerfs $(DESTDIR)$(BINDIR)/powerfs
	install -D -m 0755 powerfs-report $(DESTDIR)$(BINDIR)/powerfs-report
	install -D -m 0644 powerfs.1 $(DESTDIR)$(MANDIR)/man1/powerfs.1
	install -D -m 0644 powerfs-report.1 $(DESTDIR)$(MANDIR)/man1/powerfs-report.1
	install -D -m 0644 powerfs.5 $(DESTDIR)$(MANDIR)/man5/powerfs.5
	install -D -m 0644 powerfs.7 $(DESTDIR)$(MANDIR)/man7/powerfs.7
	mkdir -p $(DESTDIR)$(UNITDIR)
	sed 's|@BINDIR@|$(BINDIR)|g' dist/powerfs.service.in > $(DESTDIR)$(UNITDIR)/powerfs.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/powerfs.service

clean:
	rm -rf build powerfs powerfs-report

.PHONY: all deps unit check check-layers check-names lint format analyze check-vm run install clean powerfs fuzz
-include $(wildcard $(BUILD)/*.d $(BUILD)/*/*.d)
