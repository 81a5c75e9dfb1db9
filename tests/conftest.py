"""Black-box test harness for powerfs.

Every test talks to a real powerfs mount on a temporary directory, through the
ordinary system calls (os.open/os.read/os.write...), and checks the exact bytes
and errno values of /work/shared/SPEC.md.

The shape (see PITFALLS.md): start the server in the foreground, poll
os.path.ismount, and on any failure lazy-unmount and kill; on success unmount
with fusermount3 -u and require exit status 0; scan the server's output for
errors.

Fixtures:
  pfs    a mount shared by the tests of one module (options from the module's
         SHARED_ARGS); a test must leave it clean (no active lock, autosleep
         off), which the fixture checks afterwards.
  mount  a factory for per-test mounts with special options: mount(*args).

Helpers for running code as another user or without a capability live here
too (run_in_child), and Reader, a child process blocked in read(2).
"""

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import pickle
import platform
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import namedtuple
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
POWERFS = os.environ.get("POWERFS", str(REPO / "powerfs"))
POWERFS_BUILT = POWERFS     # what the suite tests, whatever a test sets
FUSERMOUNT = shutil.which("fusermount3") or "/usr/bin/fusermount3"
PYTHON = sys.executable or "/usr/bin/python3"

# Deadlines, not expectations: waits end as soon as the condition holds.
# They are generous because the suite must hold on a busy machine (two CPU
# hogs on two cores, AddressSanitizer, whose exit scans for leaks).
# POWERFS_TEST_TIME_SCALE multiplies them all (the waits below, and the
# watchdog): `make check-vm` runs modules in a guest under software
# emulation, several times slower.
TIME_SCALE = max(1.0, float(os.environ.get("POWERFS_TEST_TIME_SCALE") or 1))
MOUNT_TIMEOUT = 20.0 * TIME_SCALE  # seconds until the mount must be live
EXIT_TIMEOUT = 20.0 * TIME_SCALE   # until the server must exit after unmount
TEST_TIMEOUT = 30.0      # watchdog: a test running longer kills the servers
BAD_LOG_PATTERNS = ("CRITICAL", "ERROR", "AddressSanitizer", "LeakSanitizer",
                    "runtime error")

# Every powerfs the suite starts (directly, through the keeper or through
# scripts) inherits this: a GLib-CRITICAL aborts the server, so the test that
# provoked it fails even if nobody reads the log.
if "fatal-criticals" not in os.environ.get("G_DEBUG", ""):
    os.environ["G_DEBUG"] = ",".join(
        x for x in (os.environ.get("G_DEBUG"), "fatal-criticals") if x)

# Under AddressSanitizer and UBSan (make check SANITIZE=1) a crash ends the
# server with exit status 1 by default, which the keeper rightly takes for
# a server that gave up, not for a crash to recover from: make the
# sanitizers end it by a signal (SIGABRT, after their report), as the crash
# would have without them.
for _var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
    if "abort_on_error" not in os.environ.get(_var, ""):
        os.environ[_var] = ":".join(
            x for x in (os.environ.get(_var), "abort_on_error=1") if x)

UNMOUNT_GRACE = 1.0      # seconds before a copy held elsewhere is considered


def held_elsewhere(dev):
    """True if a mount namespace other than ours holds a mount of device
    dev (a copy made by unshare -m, a container runtime, another test
    session).  fusermount3 -u here then leaves the connection alive, and
    powerfs rightly keeps serving the copy."""
    want = f"{os.major(dev)}:{os.minor(dev)}"
    seen = {os.readlink("/proc/self/ns/mnt")}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            ns = os.readlink(f"/proc/{pid}/ns/mnt")
            if ns in seen:
                continue
            with open(f"/proc/{pid}/mountinfo") as f:
                lines = f.read().splitlines()
        except OSError:
            continue            # gone, or not ours to read
        seen.add(ns)
        if any(line.split(" ", 3)[2] == want for line in lines):
            return True
    return False


def wait_end_after_unmount(dev, exited, terminate, timeout=None):
    """After fusermount3 -u of the mount of device dev, wait until
    exited() is true.  If it is not after UNMOUNT_GRACE and another mount
    namespace holds a copy of the mount, end the server with terminate()
    (SIGTERM, as a service manager would) and wait again.  True if it
    ended in time."""
    timeout = EXIT_TIMEOUT if timeout is None else timeout
    t0 = time.monotonic()
    deadline = t0 + timeout
    signalled = False
    while not exited():
        now = time.monotonic()
        if now > deadline:
            return False
        if (not signalled and now - t0 > UNMOUNT_GRACE
                and held_elsewhere(dev)):
            terminate()
            signalled = True
            deadline = time.monotonic() + timeout
        time.sleep(0.02)
    return True


# Options of the module-shared mount unless a module sets SHARED_ARGS.
DEFAULT_SHARED_ARGS = ("--simulate-sleep-ms=100",)

CAP_BLOCK_SUSPEND = 36

# The files of the mount (SPEC.md): those that take writes (0644), and the
# rest of the root's entries.
ROOT_FILES = ("autosleep", "state", "wake_lock", "wake_unlock", "wakeup_count",
              "mem_sleep", "sync_on_suspend", "pm_async", "pm_freeze_timeout",
              "pm_test", "pm_print_times", "pm_debug_messages")
ROOT_ENTRIES = ROOT_FILES + ("pm_wakeup_irq", "suspend_stats",
                             "wakeup_sources")
STATS_COUNTERS = ("success", "fail", "failed_freeze", "failed_prepare",
                  "failed_suspend", "failed_suspend_late",
                  "failed_suspend_noirq", "failed_resume",
                  "failed_resume_early", "failed_resume_noirq")
STATS_FILES = STATS_COUNTERS + ("last_failed_errno", "last_failed_dev",
                                "last_failed_step")

SOURCES_HEADER = (b"name\t\tactive_count\tevent_count\twakeup_count\t"
                  b"expire_count\tactive_since\ttotal_time\tmax_time\t"
                  b"last_change\tprevent_suspend_time\n")
Stats = namedtuple("Stats", "active_count event_count wakeup_count "
                   "expire_count active_since total_time max_time "
                   "last_change prevent_suspend_time")

_live = set()        # mounted Powerfs instances (for the watchdog)
_children = []       # helper processes to kill before unmounting


def b(s):
    return s if isinstance(s, bytes) else s.encode()


def _die_with_this_process():
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class Powerfs:
    """One powerfs process serving one mount point."""

    def __init__(self, *args, env=None):
        self.args = [str(a) for a in args]
        self.env = env          # the keeper's environment, if not ours
        self.tmpdir = tempfile.mkdtemp(prefix="powerfs-test-")
        # Other users (setuid children) must reach the mount point.
        os.chmod(self.tmpdir, 0o755)
        self.mnt = os.path.join(self.tmpdir, "mnt")
        os.mkdir(self.mnt)
        self.logpath = os.path.join(self.tmpdir, "powerfs.log")
        self.proc = None
        self.killed_reason = None

    # --- life cycle ---------------------------------------------------------

    def start(self):
        if not os.access(POWERFS, os.X_OK):
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            pytest.fail(f"powerfs binary {POWERFS} missing: run make powerfs "
                        "or set POWERFS")
        with open(self.logpath, "wb") as log:
            # A process group of its own: the keeper and its server.  And
            # if this test process dies without its teardown (killed by a
            # harness), the keeper gets SIGTERM and unmounts, instead of
            # serving on with nobody to stop it.
            self.proc = subprocess.Popen(
                [POWERFS, "-f", *self.args, self.mnt], env=self.env,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_this_process)
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not os.path.ismount(self.mnt):
            rc = self.proc.poll()
            if rc is not None:
                log = self.log()
                shutil.rmtree(self.tmpdir, ignore_errors=True)
                pytest.fail(f"powerfs {self.args} exited with {rc} before "
                            f"mounting; output:\n{log}")
            if time.monotonic() > deadline:
                self.force_cleanup()
                pytest.fail(f"powerfs {self.args} not mounted after "
                            f"{MOUNT_TIMEOUT}s; output:\n{self.log()}")
            time.sleep(0.01)
        self.dev = os.stat(self.mnt).st_dev
        _live.add(self)
        return self

    def kill_all(self):
        """SIGKILL to the keeper and its server (or a server that became
        the keeper)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def pids(self):
        """The keeper's pid and its server's, if it runs one."""
        return [self.proc.pid] + children(self.proc.pid)

    def server_pid(self, timeout=5.0 * TIME_SCALE):
        """The pid of the keeper's server, once it runs."""
        found = []
        assert wait_until(lambda: found.extend(children(self.proc.pid))
                          or found, timeout=timeout), \
            f"no server under keeper {self.proc.pid}:\n{self.log()}"
        return found[0]

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        try:
            with open(self.logpath, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return getattr(self, "final_log", "")

    def force_cleanup(self):
        subprocess.run([FUSERMOUNT, "-uz", self.mnt], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=10)
        self.kill_all()
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass

    def abort(self, reason):
        """Watchdog: kill the server so that hung requests fail at once."""
        self.killed_reason = reason
        self.kill_all()
        subprocess.run([FUSERMOUNT, "-uz", self.mnt], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=10)

    def stop(self):
        """Unmount, require exit status 0 and a clean log; fail otherwise."""
        _live.discard(self)
        problems = []
        if self.killed_reason:
            problems.append(f"server killed: {self.killed_reason}")
        rc = self.proc.poll()
        if rc is not None:
            if not self.killed_reason:
                problems.append(f"powerfs died during the test (status {rc})")
        else:
            r = subprocess.run([FUSERMOUNT, "-u", self.mnt], capture_output=True,
                               timeout=10)
            if r.returncode != 0:
                problems.append("fusermount3 -u failed: "
                                + r.stderr.decode(errors="replace").strip())
            else:
                if not wait_end_after_unmount(
                        self.dev, lambda: self.proc.poll() is not None,
                        lambda: self.proc.send_signal(signal.SIGTERM)):
                    problems.append(f"powerfs did not exit {EXIT_TIMEOUT}s "
                                    "after fusermount3 -u")
                else:
                    rc = self.proc.wait()
                    if rc != 0:
                        problems.append(f"powerfs exited with status {rc} "
                                        "after fusermount3 -u")
        if problems:
            self.force_cleanup()
        log = self.final_log = self.log()
        bad = [line for line in log.splitlines()
               if any(p in line for p in BAD_LOG_PATTERNS)]
        if bad:
            problems.append("errors in the server output:\n  "
                            + "\n  ".join(bad[:20]))
        if not os.path.ismount(self.mnt):
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        if problems:
            pytest.fail(f"powerfs {self.args}: " + "; ".join(problems)
                        + f"\n--- output ---\n{log[-4000:]}", pytrace=False)

    # --- file access --------------------------------------------------------

    def path(self, name=""):
        return os.path.join(self.mnt, name) if name else self.mnt

    def read(self, name, size=8192):
        """One open and one read(2) of size bytes (the whole content)."""
        fd = os.open(self.path(name), os.O_RDONLY)
        try:
            return os.read(fd, size)
        finally:
            os.close(fd)

    def read_all(self, name):
        return read_to_eof(self.path(name))

    def write(self, name, data, flags=os.O_WRONLY):
        """One open and one write(2); returns write's result or raises."""
        fd = os.open(self.path(name), flags)
        try:
            return os.write(fd, b(data))
        finally:
            os.close(fd)

    def lock(self, *names):
        for n in names:
            n = b(n)
            assert self.write("wake_lock", n) == len(n)

    def unlock(self, *names):
        for n in names:
            n = b(n)
            assert self.write("wake_unlock", n) == len(n)

    def active(self):
        """Names listed in wake_lock."""
        return self.read("wake_lock").split()

    def inactive(self):
        return self.read("wake_unlock").split()

    def count(self):
        """The registered event count (blocks while a source is active)."""
        data = self.read("wakeup_count")
        assert re.fullmatch(rb"\d+\n", data), data
        return int(data)

    def stat(self, name):
        return int(self.read("suspend_stats/" + name))

    def sources(self):
        """wakeup_sources as an ordered dict name -> Stats."""
        return parse_sources(self.read_all("wakeup_sources"))

    def source(self, name):
        return self.sources()[b(name)]

    def check_clean(self, quiet=False):
        """The shared mount must be left without active locks, autosleep
        off.  Restores that state and fails the test otherwise (quiet: the
        test failed already, only restore)."""
        if not self.alive():
            return
        problems = []
        listing = self.read("wake_lock")
        if listing != b"\n":
            problems.append(f"wake_lock left {listing!r}")
            for n in listing.split():
                try:
                    self.write("wake_unlock", n)
                except OSError:
                    pass
        auto = self.read("autosleep")
        if auto != b"off\n":
            problems.append(f"autosleep left {auto!r}")
            try:
                self.write("autosleep", b"off")
            except OSError:
                pass
        if problems and not quiet:
            pytest.fail("test left the shared mount dirty: "
                        + "; ".join(problems), pytrace=False)


class ExtraMounts(Powerfs):
    """powerfs with second mounts served by the same process
    (--class-wakeup=DIR, --wakeup-reasons=DIR): self.extra maps each option
    to its directory, made in tmpdir.  All mounts must come up; at the end
    the second ones are unmounted with fusermount3 -u first (the server goes
    on until the main one goes), and the server must exit with status 0 and
    a clean log."""

    def __init__(self, *args, extra=()):
        super().__init__(*args)
        self.extra = {}
        for option in extra:
            d = os.path.join(self.tmpdir, option)
            os.mkdir(d)
            self.extra[option] = d
            self.args.insert(0, f"--{option}={d}")

    def start(self):
        super().start()
        for option, d in self.extra.items():
            if not wait_until(lambda: os.path.ismount(d) or not self.alive(),
                              timeout=5.0) or not self.alive():
                self.force_cleanup()
                pytest.fail(f"--{option} mount not live; output:\n"
                            f"{self.log()}")
        return self

    def _detach_extra(self):
        for d in self.extra.values():
            subprocess.run([FUSERMOUNT, "-uz", d], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10)

    def force_cleanup(self):
        self._detach_extra()
        super().force_cleanup()

    def abort(self, reason):
        super().abort(reason)
        self._detach_extra()

    def stop(self):
        problem = None
        for option, d in self.extra.items():
            if not os.path.ismount(d) or not self.alive():
                continue
            r = subprocess.run([FUSERMOUNT, "-u", d], capture_output=True,
                               timeout=10)
            if r.returncode != 0:
                problem = (f"fusermount3 -u of the --{option} mount failed: "
                           + r.stderr.decode(errors="replace").strip())
                subprocess.run([FUSERMOUNT, "-uz", d], capture_output=True,
                               timeout=10)
            elif not self.alive():
                problem = f"unmounting the --{option} mount ended powerfs"
        super().stop()
        if problem:
            pytest.fail(problem, pytrace=False)


def read_to_eof(path):
    """One open, then read(2) until end of file: the reference reader."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            c = os.read(fd, 65536)
            if not c:
                return b"".join(chunks)
            chunks.append(c)
    finally:
        os.close(fd)


def powerfs_pids(mnt):
    """Pids of the powerfs processes whose command line names mnt."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if os.path.basename(argv[0]).startswith(b"powerfs") and \
                mnt.encode() in argv:
            pids.append(int(d))
    return pids


@contextlib.contextmanager
def exclusive(path, wait, interval=0.2):
    """Hold an flock on path (made if missing) for the block, so that runs
    sharing a fixed resource (/run/power, /tmp/p) take turns; skip the
    test if another run holds it for longer than wait seconds."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.skip(f"{path} held by another test run for "
                                f"{wait:.0f} s")
                time.sleep(interval)
        yield
    finally:
        os.close(fd)


def children(pid):
    """Pids whose parent is pid."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def parse_sources(data):
    """Parse wakeup_sources leniently (any tabs/spaces); the exact format is
    checked by test_wakeup_sources.py.  Returns an ordered dict."""
    assert data.startswith(SOURCES_HEADER), data[:200]
    out = {}
    for line in data[len(SOURCES_HEADER):].split(b"\n")[:-1]:
        fields = line.split()
        assert len(fields) == 10, line
        out[fields[0]] = Stats(*(int(x) for x in fields[1:]))
    assert data.endswith(b"\n")
    return out


# --- general helpers -----------------------------------------------------------

@contextlib.contextmanager
def raises_errno(code):
    """with raises_errno(errno.EINVAL): os.write(...)"""
    with pytest.raises(OSError) as e:
        yield e
    got = e.value.errno
    assert got == code, (f"expected {errno.errorcode[code]}, got "
                         f"{errno.errorcode.get(got, got)} ({e.value})")


def wait_until(pred, timeout=5.0, interval=0.01):
    """Poll pred() until true; returns its last value.  (The deadline is
    timeout times TIME_SCALE.)"""
    deadline = time.monotonic() + timeout * TIME_SCALE
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)


class Background:
    """Run fn() in a daemon thread (for calls that are meant to block).
    tid is the thread's id, for /proc (wait_in_syscall(b.tid, ...))."""

    def __init__(self, fn, *args):
        self.result = None
        self.error = None
        self.finished = threading.Event()
        self.t0 = time.monotonic()
        self.t1 = None
        self.tid = None
        started = threading.Event()

        def run():
            self.tid = threading.get_native_id()
            started.set()
            try:
                self.result = fn(*args)
            except BaseException as e:   # noqa: B036 - reported to the test
                self.error = e
            finally:
                self.t1 = time.monotonic()
                self.finished.set()
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        started.wait()

    def wait(self, timeout=10.0):
        """Wait for the call; returns its result or raises its exception."""
        assert self.finished.wait(timeout * TIME_SCALE), \
            f"call still blocked after {timeout * TIME_SCALE}s"
        if self.error is not None:
            raise self.error
        return self.result

    def elapsed(self):
        return self.t1 - self.t0


def thread_switches(pid):
    """Context switches of all of pid's threads so far: a process that
    sleeps without a timer adds none while nothing happens."""
    n = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches",
                                        "nonvoluntary_ctxt_switches")):
                        n += int(line.split()[1])
        except FileNotFoundError:
            pass
    return n


def timed(fn, *args, timeout=5.0):
    """Call fn in a thread and fail if it does not return within timeout
    (a request that should be served at once)."""
    return Background(fn, *args).wait(timeout)


# --- a root file system for systemd-nspawn ------------------------------------------

NSPAWN = shutil.which("systemd-nspawn")
BUSYBOX = "/bin/busybox"                 # busybox-static
APPLETS = ("sh", "cat", "dd", "echo", "grep")
RUN_NSPAWN = "/run/systemd/nspawn"


def is_static(path):
    """True if the ELF file asks for no program interpreter (PT_INTERP):
    it runs in a rootfs without libraries."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:     # 64-bit only
            return False
        order = "little" if head[5] == 1 else "big"
        phoff = int.from_bytes(head[32:40], order)
        phentsize = int.from_bytes(head[54:56], order)
        phnum = int.from_bytes(head[56:58], order)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(int.from_bytes(table[i:i + 4], order) != 3      # PT_INTERP
               for i in range(0, len(table), phentsize))


@pytest.fixture(scope="module")
def rootfs():
    """A minimal busybox root file system for systemd-nspawn (it wants an
    os-release file), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("systemd-nspawn needs root")
    if not NSPAWN:
        pytest.skip("systemd-nspawn missing: run scripts/install-deps.sh")
    if not os.path.exists(BUSYBOX) or not is_static(BUSYBOX):
        pytest.skip(f"{BUSYBOX} is not a static busybox "
                    "(install busybox-static)")
    made_run_dir = not os.path.exists(RUN_NSPAWN)
    root = tempfile.mkdtemp(prefix="powerfs-nspawn-")
    try:
        for d in ("bin", "etc", "usr/lib", "proc", "sys", "dev", "tmp",
                  "run"):
            os.makedirs(os.path.join(root, d))
        shutil.copy(BUSYBOX, os.path.join(root, "bin", "busybox"))
        for a in APPLETS:
            os.symlink("busybox", os.path.join(root, "bin", a))
        with open(os.path.join(root, "usr/lib/os-release"), "w") as f:
            f.write("ID=powerfs-test\nNAME=powerfs test rootfs\n")
        os.symlink("../usr/lib/os-release",
                   os.path.join(root, "etc/os-release"))
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if made_run_dir:
            # nspawn leaves its (empty) state directories behind.
            for d in ("propagate", "locks", "unix-export", ""):
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(RUN_NSPAWN, d))



# --- cgroup freezers -------------------------------------------------------------

CGROUP_V2 = next((d for d in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")
                  if os.path.exists(os.path.join(d, "cgroup.procs"))
                  and os.path.exists(os.path.join(d, "cgroup.subtree_control"))),
                 None)


def mounted_v1_freezer():
    """Where a cgroup v1 hierarchy with the freezer is mounted, or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mine, _, theirs = line.partition(" - ")
            fstype, _, opts = (theirs.split() + ["", "", ""])[:3]
            if fstype == "cgroup" and "freezer" in opts.split(","):
                return mine.split()[4]
    return None


@contextlib.contextmanager
def freezer_root(version):
    """The root of a cgroup freezer hierarchy of version v1 or v2 (a
    context manager).  Under systemd's unified layout (Debian 12's default,
    the check-vm guest) nothing mounts the v1 freezer, which LXC on hybrid
    hosts and Android use: it is mounted for the test, and unmounted after
    (skip if it cannot be)."""
    if version == "v2":
        if not CGROUP_V2:
            pytest.skip("no cgroup v2 here")
        yield CGROUP_V2
        return
    root = mounted_v1_freezer()
    if root:
        yield root
        return
    d = tempfile.mkdtemp(prefix="powerfs-freezer-v1-")
    r = subprocess.run(["mount", "-t", "cgroup", "-o", "freezer",
                        "powerfs-test", d], capture_output=True, text=True)
    if r.returncode:
        os.rmdir(d)
        pytest.skip(f"no cgroup v1 freezer, and none can be mounted: "
                    f"{r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", d])
        with contextlib.suppress(OSError):
            os.rmdir(d)


# --- running code as someone else -----------------------------------------------

class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


_libc = ctypes.CDLL(None, use_errno=True)
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def set_effective_cap(cap, on):
    """Put cap into this thread's effective set (from the permitted set), or
    take it out (it stays permitted)."""
    hdr = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if _libc.capget(ctypes.byref(hdr), data) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "capget: " + os.strerror(e))
    if on:
        data[cap // 32].effective |= 1 << (cap % 32)
    else:
        data[cap // 32].effective &= ~(1 << (cap % 32)) & 0xffffffff
    if _libc.capset(ctypes.byref(hdr), data) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "capset: " + os.strerror(e))


def drop_effective_cap(cap):
    """Remove cap from this process's effective set (keeps it permitted)."""
    set_effective_cap(cap, False)


def effective_caps():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    raise AssertionError("no CapEff")


def unshare_user_namespace():
    CLONE_NEWUSER = 0x10000000
    if _libc.unshare(CLONE_NEWUSER) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "unshare(CLONE_NEWUSER): " + os.strerror(e))


class ChildSetupError(Exception):
    """The child could not become who it should be (raised by run_in_child
    instead of fn's result, so a test can skip)."""


def unshare_as_root(fn, *args):
    """For run_in_child: what `unshare -Ur` does, then fn(*args).  Makes a
    user namespace (owned by our uid) and maps its root to our own uid and
    gid, so fn runs as uid 0 there with every capability there.  Works
    inside another user namespace too."""
    uid, gid = os.getuid(), os.getgid()
    # setresuid() made us non-dumpable, which hides /proc/self from us.
    PR_SET_DUMPABLE = 4
    try:
        assert _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0
        unshare_user_namespace()
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"0 {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"0 {gid} 1")
    except OSError as e:
        # Not an OSError: an EPERM here must not pass for the write's.
        raise ChildSetupError(f"unshare -Ur as uid {uid}: {e}") from None
    assert (os.getuid(), os.getgid()) == (0, 0)
    return fn(*args)


def run_in_child(fn, *args, uid=None, gid=None, groups=None, drop_caps=(),
                 new_userns=False, parent_map=None, timeout=10.0):
    """Run fn(*args) in a forked child, optionally as another uid/gid with
    the given supplementary groups, or with capabilities dropped from the
    effective set, or in a new user namespace (new_userns).  Returns fn's
    result; an OSError raised by fn is raised again here with the same
    errno; other exceptions become AssertionError.  A child still running
    after timeout is killed (test failure).

    parent_map="0 100000 65536" (implies new_userns): the namespace is
    mapped as a container runtime started by root does it: this process
    (the parent) writes the child's uid_map and gid_map, and the child then
    becomes root of the namespace (uid and gid 0 there, no groups, every
    capability there).  The namespace's owner is then the child's uid
    before it unshared (root unless uid= is given)."""
    r, w = os.pipe()
    if parent_map is not None:
        new_userns = True
        unshared_r, unshared_w = os.pipe()     # child -> parent
        mapped_r, mapped_w = os.pipe()         # parent -> child
    pid = os.fork()
    if pid == 0:     # child
        try:
            os.close(r)
            try:
                if groups is not None:
                    os.setgroups(list(groups))
                if gid is not None:
                    os.setresgid(gid, gid, gid)
                if uid is not None:
                    os.setresuid(uid, uid, uid)
                for cap in drop_caps:
                    drop_effective_cap(cap)
                    assert not effective_caps() & (1 << cap)
                if new_userns:
                    unshare_user_namespace()
                if parent_map is not None:
                    os.close(unshared_r)
                    os.close(mapped_w)
                    os.write(unshared_w, b"u")
                    assert os.read(mapped_r, 1) == b"m", "parent gave up"
                    os.setgroups([])
                    os.setresgid(0, 0, 0)
                    os.setresuid(0, 0, 0)
            except BaseException:   # noqa: B036
                res = ("setup", traceback.format_exc())
            else:
                try:
                    res = ("ok", fn(*args))
                except ChildSetupError:
                    res = ("setup", traceback.format_exc())
                except OSError as e:
                    res = ("oserror", e.errno, str(e))
                except BaseException:   # noqa: B036
                    res = ("exc", traceback.format_exc())
            data = pickle.dumps(res)
            while data:
                data = data[os.write(w, data):]
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    timeout *= TIME_SCALE
    deadline = time.monotonic() + timeout
    try:
        if parent_map is not None:
            _write_maps(pid, parent_map, unshared_r, unshared_w, mapped_r,
                        mapped_w, deadline)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"child still running after {timeout}s "
                                     "(blocked in a request?)")
            ready, _, _ = select.select([r], [], [], left)
            if ready:
                c = os.read(r, 65536)
                if not c:
                    break
                chunks.append(c)
    finally:
        os.close(r)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
    if not chunks:
        raise AssertionError("child died without a result")
    res = pickle.loads(b"".join(chunks))
    if res[0] == "ok":
        return res[1]
    if res[0] == "oserror":
        raise OSError(res[1], res[2])
    if res[0] == "setup":
        raise ChildSetupError(res[1])
    raise AssertionError("child raised:\n" + res[1])


def _write_maps(pid, ids, unshared_r, unshared_w, mapped_r, mapped_w,
                deadline):
    """run_in_child(parent_map=...): once the child has unshared, write its
    uid_map and gid_map, then let it go on.  If the child fails before
    (its end of the pipe closes), write nothing: its error follows."""
    os.close(unshared_w)
    os.close(mapped_r)
    try:
        ready, _, _ = select.select([unshared_r], [], [],
                                    max(0.0, deadline - time.monotonic()))
        if not ready or os.read(unshared_r, 1) != b"u":
            return
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(ids)
        os.write(mapped_w, b"m")
    finally:
        os.close(unshared_r)
        os.close(mapped_w)


def open_write_close(path, data, flags=os.O_WRONLY):
    """For run_in_child: open, one write, close; returns write's result."""
    fd = os.open(path, flags)
    try:
        return os.write(fd, b(data))
    finally:
        os.close(fd)


def open_read_close(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 8192)
    finally:
        os.close(fd)


def open_close(path, flags):
    os.close(os.open(path, flags))
    return True


# --- a child process blocked in read(2) -------------------------------------------

_READER = r'''
import ctypes, json, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.read.restype = ctypes.c_ssize_t
libc.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
libc.pread.restype = ctypes.c_ssize_t
libc.sendfile.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.sendfile.restype = ctypes.c_ssize_t
libc.splice.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                        ctypes.c_size_t, ctypes.c_uint]
libc.splice.restype = ctypes.c_ssize_t
path, mode, offset, nonblock = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
call = sys.argv[5]
if mode in ("handler", "restart"):
    signal.signal(signal.SIGUSR1, lambda s, f: None)
    signal.siginterrupt(signal.SIGUSR1, mode == "handler")
elif mode == "ignore":
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
fd = os.open(path, os.O_RDONLY | (os.O_NONBLOCK if nonblock else 0))
buf = ctypes.create_string_buffer(8192)
r, w = os.pipe()
sys.stdout.write("ready\n"); sys.stdout.flush()
if call in ("sendfile", "cat"):     # as busybox cat reads
    off = ctypes.c_long(offset)
    n = libc.sendfile(w, fd, None if offset < 0 else ctypes.byref(off), 8192)
    if call == "cat" and n < 0 and ctypes.get_errno() == 22:
        # busybox cat reads(2) when sendfile fails with EINVAL (powerfs
        # refuses the page cache's reads).
        n = libc.read(fd, buf, 8192) if offset < 0 else libc.pread(fd, buf, 8192, offset)
        call = "read"
elif call == "splice":
    off = ctypes.c_long(offset)
    n = libc.splice(fd, None if offset < 0 else ctypes.byref(off), w, None, 8192, 0)
elif offset < 0:
    n = libc.read(fd, buf, 8192)
else:
    n = libc.pread(fd, buf, 8192, offset)
e = ctypes.get_errno() if n < 0 else 0
if call in ("sendfile", "splice", "cat") and n > 0:
    buf.raw = os.read(r, n).ljust(8192, b"\0")
sys.stdout.write(json.dumps({"n": n, "errno": e, "data": buf.raw[:max(n, 0)].hex()}) + "\n")
sys.stdout.flush()
'''

_READ_SYSCALLS = {"x86_64": ("0", "17"), "aarch64": ("63", "67")}
_CALL_SYSCALLS = {
    "read": _READ_SYSCALLS,
    "sendfile": {"x86_64": ("40",), "aarch64": ("71",)},
    "cat": {"x86_64": ("0", "17", "40"), "aarch64": ("63", "67", "71")},
    "splice": {"x86_64": ("275",), "aarch64": ("76",)},
}


# What powerfs -d logs for a read that came through the page cache.
_PAGE_CACHE_READ = re.compile(
    r"read (\S+) \d+@\d+ by pid (\d+) through the page cache: EINVAL")


def page_cache_reads(log):
    """The reads a powerfs started with -d refused because they came through
    the page cache, as (file, pid) pairs: sendfile(2) and splice(2) on Linux
    6.5 and later (before, they come as read(2) does), and a private mmap.
    Tests tell the path the kernel took by these lines, not by its
    version."""
    return [(m.group(1), int(m.group(2)))
            for m in _PAGE_CACHE_READ.finditer(log)]


class LogMark:
    """Where the mount's log stood: page_cache() then says whether powerfs
    refused a read of name (through the page cache) since."""

    def __init__(self, pfs):
        self.pfs = pfs
        self.at = len(pfs.log())

    def page_cache(self, name, pid=None):
        return any(n == name and pid in (None, p)
                   for n, p in page_cache_reads(self.pfs.log()[self.at:]))


# The system calls a blocked reader waits in, by machine.
SYSCALL_NR = {"x86_64": {"read": "0", "sendfile": "40"},
              "aarch64": {"read": "63", "sendfile": "71"}}


def waits_in(pid):
    with open(f"/proc/{pid}/syscall") as f:
        return f.read().split(" ", 1)[0]


def check_cat_path(mark, pid, name="wakeup_count"):
    """A busybox-cat-like reader of name, blocked, waits where the path the
    kernel took says: in read(2) after powerfs refused its sendfile through
    the page cache (Linux 6.5 and later), in sendfile(2) where the kernel
    sent that as a read(2) (before).  Returns the path."""
    path = []

    def settled():
        path[:] = ["read" if mark.page_cache(name, pid) else "sendfile"]
        return nrs is None or waits_in(pid) == nrs[path[0]]
    nrs = SYSCALL_NR.get(platform.machine())
    assert wait_until(settled, timeout=2), \
        f"pid {pid} waits in system call {waits_in(pid)}, not {path[0]}"
    return path[0]


def _state(pid, tid=None):
    """The scheduler state of a thread ("R", "S", "D", ...), or None."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def all_asleep(pids):
    """True if every thread of the processes pids sleeps waiting for
    something (S): none runs or waits to run, none is stopped or in an
    uninterruptible wait (which a thread busy with a request may be)."""
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        if any(_state(pid, tid) not in ("S", "I", "Z", None) for tid in tids):
            return False
    return True


def _powerfs_of(pid, fd):
    """The running Powerfs of this suite whose mounts hold the file of
    pid's descriptor fd, or None."""
    try:
        path = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None
    for p in list(_live):
        dirs = [p.mnt, *getattr(p, "extra", {}).values()]
        if any(path == d or path.startswith(d + "/") for d in dirs):
            return p
    return None


def taken(pid, server):
    """True if process pid sleeps in a request to server (a Powerfs) that
    server has taken.  The kernel queues a request and wakes a thread of
    the server that waits in read(2) on /dev/fuse before the caller goes
    to sleep; so once the caller sleeps and no thread of the server runs,
    that thread has read the request and processed it (answered or parked
    it) and waits again."""
    return _state(pid) in ("S", "D") and all_asleep(server.pids())


def wait_in_syscall(proc, syscalls, name, timeout=5.0, server=None,
                    queued_only=False):
    """Wait until the child proc (a Popen, or a pid) sleeps in one of the
    system calls syscalls (numbers by machine, from /proc/PID/syscall), and
    until the powerfs that serves the call's file (server, or the one of
    this suite whose mount holds the file of the call's first argument, a
    descriptor) has taken the request (see taken()).  queued_only: the
    server is stopped on purpose and cannot take it; wait for the caller
    alone.  name is for the error.  A child that exits meanwhile ends the
    wait."""
    nums = syscalls.get(platform.machine())
    pid = getattr(proc, "pid", proc)
    seen = None
    deadline = time.monotonic() + timeout * TIME_SCALE
    while time.monotonic() < deadline:
        if hasattr(proc, "poll") and proc.poll() is not None:
            return
        try:
            with open(f"/proc/{pid}/syscall") as f:
                fields = f.read().split()
        except OSError:
            return                  # gone
        seen = fields[:1]
        if fields and fields[0] not in ("running", "-1") and \
                (nums is None or fields[0] in nums):
            srv = None if queued_only else \
                server or _powerfs_of(pid, int(fields[1], 16))
            if _state(pid) in ("S", "D") and (srv is None or taken(pid, srv)):
                return
        time.sleep(0.01)
    raise AssertionError(f"child never sat in {name}(2) with its request "
                         f"taken (/proc/{pid}/syscall: {seen})")


class Reader:
    """A child process that opens path and does one read(2) (or pread at
    offset) through libc, so that EINTR is visible.  mode: "default" (no
    handler), "handler" (SIGUSR1 handler, no SA_RESTART), "restart" (handler
    with SA_RESTART), "ignore" (SIGUSR1 ignored).  call: "read" (read or
    pread), "sendfile" or "splice" into a pipe (through the page cache on
    Linux 6.5 and later, see page_cache_reads()), or "cat": sendfile, and
    read(2) if it fails, as busybox cat reads.
    Use as a context manager: the child is killed on exit."""

    def __init__(self, path, mode="default", offset=-1, nonblock=False,
                 call="read"):
        self.call = call
        self.proc = subprocess.Popen(
            [PYTHON, "-c", _READER, path, mode, str(offset),
             "1" if nonblock else "0", call],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        _children.append(self.proc)
        self._buf = b""
        line = self._line(10.0 * TIME_SCALE)
        if line != b"ready":
            err = self.proc.stderr.read().decode(errors="replace") \
                if self.proc.poll() is not None else ""
            raise AssertionError(f"reader did not start: {line!r} {err}")
        self._result = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            # Blocked in a request that was sent to the server: even
            # SIGKILL waits for its answer.  The mount teardown kills the
            # server, which frees it.
            raise AssertionError("a reader blocked in read(2) survived "
                                 "SIGKILL for 5 s: the server does not "
                                 "answer interrupts") from None
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()

    def _line(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            c = os.read(fd, 65536)
            if not c:
                return None
            self._buf += c
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def wait_in_read(self, timeout=5.0):
        """Wait until the child sits in the read system call (so a signal
        sent now hits the blocked read, not the code before it)."""
        call = getattr(self, "call", "read")
        wait_in_syscall(self.proc, _CALL_SYSCALLS[call], call, timeout)

    def blocked(self, secs=0.3):
        """True if the read has still not returned after secs seconds."""
        if self._result is None:
            line = self._line(secs)
            if line is not None:
                self._result = json.loads(line)
        return self._result is None

    def result(self, timeout=5.0):
        """(n, errno, data) of the read; fails if it does not return in
        time."""
        if self._result is None:
            line = self._line(timeout * TIME_SCALE)
            assert line is not None, \
                f"read still blocked after {timeout * TIME_SCALE}s"
            self._result = json.loads(line)
        r = self._result
        return r["n"], r["errno"], bytes.fromhex(r["data"])


def kill_children():
    while _children:
        p = _children.pop()
        if p.poll() is None:
            p.kill()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass


def close_leaked_fds(mnt):
    """Close this process's fds on files under mnt (a failed test may have
    left one open, which would make the unmount fail); returns their
    paths."""
    leaked = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target == mnt or target.startswith(mnt + "/"):
            try:
                os.close(int(fd))
            except OSError:
                continue
            leaked.append(target)
    return leaked


# --- fixtures ----------------------------------------------------------------------

class _Shared:
    def __init__(self, args):
        self.args = args
        self.inst = None
        self.errors = []

    def get(self):
        if self.inst is not None and not self.inst.alive():
            # Killed by the watchdog or crashed: that test has failed
            # already; give the next tests a fresh server.
            try:
                self.inst.stop()
            except pytest.fail.Exception as e:
                self.errors.append(str(e))
            self.inst = None
        if self.inst is None:
            self.inst = Powerfs(*self.args).start()
        return self.inst

    def close(self):
        kill_children()
        if self.inst is not None:
            self.inst.stop()


@pytest.fixture(scope="module")
def shared_mount(request):
    holder = _Shared(getattr(request.module, "SHARED_ARGS",
                             DEFAULT_SHARED_ARGS))
    yield holder
    holder.close()


@pytest.fixture
def pfs(shared_mount, request):
    """The module's shared mount; the test must leave it clean."""
    inst = shared_mount.get()
    yield inst
    kill_children()
    rep = getattr(request.node, "rep_call", None)
    failed = rep is None or rep.failed
    leaked = close_leaked_fds(inst.mnt)
    inst.check_clean(quiet=failed)
    if leaked and not failed:
        pytest.fail(f"test left files open: {leaked}", pytrace=False)


def mounts_of(cls):
    """A fixture's body: a factory of started cls instances (Powerfs or a
    subclass), each stopped and checked at the end of the test."""
    insts = []

    def factory(*args):
        inst = cls(*args).start()
        insts.append(inst)
        return inst
    yield factory
    kill_children()
    failures = []
    for inst in insts:
        close_leaked_fds(inst.mnt)
        try:
            inst.stop()
        except pytest.fail.Exception as e:
            failures.append(str(e))
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)


@pytest.fixture
def mount():
    """Factory for per-test mounts: mount("--wakelock-limit=3", ...)."""
    yield from mounts_of(Powerfs)


@pytest.fixture(autouse=True)
def _watchdog(request):
    """A test that hangs (a request the server never answers) gets its
    servers killed after TEST_TIMEOUT seconds, which fails the hung call."""
    marker = request.node.get_closest_marker("timeout")
    timeout = (marker.args[0] if marker else TEST_TIMEOUT) * TIME_SCALE
    fired = []

    def fire():
        fired.append(True)
        for inst in list(_live):
            inst.abort(f"test {request.node.name} exceeded {timeout}s")
    timer = threading.Timer(timeout, fire)
    timer.daemon = True
    timer.start()
    yield
    timer.cancel()
    kill_children()
    if fired:
        pytest.fail(f"test timed out after {timeout}s; servers were killed",
                    pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): watchdog limit")
