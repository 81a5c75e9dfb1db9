"""LXC containers with the shipped dist/lxc/powerfs.conf.

The host runs powerfs as the recipe says, on exactly the recipe's mount
points (/run/power, /run/power-wakeup and /run/power-reasons); throwaway
busybox containers
(lxc-create -t busybox, in a temporary lxcpath) include the shipped file
unchanged.  Every test runs twice: in a privileged container (host powerfs
without --owner) and in an unprivileged one (lxc.idmap to 100000, host
powerfs with --owner=100000:100000).  Everything inside the container is
done with busybox's own tools through lxc-attach, and read both ways:
`dd` reads with read(2), busybox `cat` with sendfile(2) (checked against
/proc/PID/syscall where a reader blocks).  The bytes must be what a
read(2) on the host shows.

The tests skip when not root, when LXC is missing, or when one of the
recipe's mount points is already one (someone's powerfs is there).
Runs in several worktrees take turns through a lock file.
"""

import contextlib
import os
import platform
import re
import select
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

import conftest
from conftest import SOURCES_HEADER, parse_sources, wait_until
from test_class_wakeup import ClassWakeup

pytestmark = pytest.mark.timeout(240)

CONF = str(conftest.REPO / "dist" / "lxc" / "powerfs.conf")
POWER = "/run/power"                # the recipe's mount points
WAKEUP = "/run/power-wakeup"
REASONS = "/run/power-reasons"
RUN_LOCK = "/run/lock/powerfs-test-run-power.lock"
RUN_LOCK_WAIT = 120.0               # another worktree's run may hold it
SUBID_LINE = "root:100000:65536"    # root may map 100000..165535
ROOT_BASE = {"privileged": 0, "unprivileged": 100000}

FREEZE_DEADLINE = 1.0     # lxc-freeze -> FROZEN, with a reader blocked
STOP_DEADLINE = 10.0      # lxc-stop -k -> STOPPED
D_STATE_LIMIT = 0.5       # a task seen in D this long is stuck, not busy
NUMBER = re.compile(rb"(0|[1-9][0-9]*)\n")

# busybox applets and the system call each reads with (strace-checked,
# busybox 1.35): dd does one read(2) of 8192 bytes (and reads again after
# EINTR), cat uses sendfile(2), and read(2) when that fails: on Linux 6.5
# and later powerfs refuses sendfile, which comes through the page cache
# (the host's powerfs runs with -d, which logs it).
TOOLS = {"read": lambda path: ("dd", f"if={path}", "bs=8192", "count=1"),
         "sendfile": lambda path: ("cat", path)}
DD_STATUS = re.compile(r"\d+\+\d+ records (in|out)|\d+ bytes .*copied.*")
SYSCALLS = {"x86_64": {"read": "0", "sendfile": "40"},
            "aarch64": {"read": "63", "sendfile": "71"}}

EXPECTED_STATE = b"freeze mem disk\n"   # the simulated backend's default


def run(*argv, timeout=60, check=True, **kw):
    r = subprocess.run([str(a) for a in argv], capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))}: status "
                             f"{r.returncode}\nstdout: {r.stdout!r}\n"
                             f"stderr: {r.stderr.decode(errors='replace')}")
    return r


def host_read(path):
    """What a read(2)-based cat shows on the host."""
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


# --- the host's side -------------------------------------------------------------

class HostPowerfs(ClassWakeup):
    """powerfs on the recipe's mount points, in the foreground (with -d,
    whose log says which reads came through the page cache)."""

    def __init__(self, *args):
        conftest.Powerfs.__init__(self, *args)
        os.rmdir(self.mnt)
        self.mnt, self.cw = POWER, WAKEUP
        self.extra = {"class-wakeup": WAKEUP, "wakeup-reasons": REASONS}
        self.args[:0] = [f"--class-wakeup={WAKEUP}",
                         f"--wakeup-reasons={REASONS}", "-d"]


def run_power_lock():
    """Only one test run at a time may own /run/power."""
    return conftest.exclusive(RUN_LOCK, RUN_LOCK_WAIT, interval=0.5)


@contextlib.contextmanager
def mount_points():
    """mkdir -p the mount points (powerfs does not create them); remove
    what was created here afterwards."""
    made = []
    for d in (POWER, WAKEUP, REASONS):
        if os.path.ismount(d):
            pytest.skip(f"{d} is busy (already a mount point): stop that "
                        "powerfs to run the LXC tests")
        if not os.path.isdir(d):
            os.makedirs(d)
            made.append(d)
    try:
        yield
    finally:
        for d in reversed(made):
            if not os.path.ismount(d):
                with contextlib.suppress(OSError):
                    os.rmdir(d)


@contextlib.contextmanager
def subid_entries():
    """root:100000:65536 in /etc/subuid and /etc/subgid (newuidmap insists
    on them even for root); only lines added here are removed."""
    added = []
    try:
        for f in ("/etc/subuid", "/etc/subgid"):
            try:
                with open(f) as fh:
                    lines = fh.read().splitlines()
            except FileNotFoundError:
                lines = []
            if SUBID_LINE not in lines:
                with open(f, "a") as fh:
                    fh.write(SUBID_LINE + "\n")
                added.append(f)
        yield
    finally:
        for f in added:
            with open(f) as fh:
                lines = fh.read().splitlines()
            with contextlib.suppress(ValueError):
                lines.remove(SUBID_LINE)
            with open(f, "w") as fh:
                fh.write("".join(line + "\n" for line in lines))


# --- containers --------------------------------------------------------------------

class Container:
    """One busybox container in a temporary lxcpath."""

    def __init__(self, lxcpath, name, kind):
        self.path, self.name, self.kind = lxcpath, name, kind
        self.base = ROOT_BASE[kind]
        self.log = os.path.join(lxcpath, name + ".log")
        self.procs = []          # Popen objects to reap after a test
        self.dirty = False       # restart before the next test
        self._pid = None         # init's host pid while running
        self._freezer = None

    def lxc(self, tool, *args, **kw):
        return run(f"lxc-{tool}", "-n", self.name, "-P", self.path, *args,
                   **kw)

    def create(self):
        conf = os.path.join(self.path, self.name + ".create.conf")
        with open(conf, "w") as f:
            f.write("lxc.net.0.type = empty\n")
            if self.base:
                f.write(f"lxc.idmap = u 0 {self.base} 65536\n"
                        f"lxc.idmap = g 0 {self.base} 65536\n")
        self.lxc("create", "-t", "busybox", "-f", conf, timeout=120)
        # The shipped file, unchanged, as a user includes it.
        with open(os.path.join(self.path, self.name, "config"), "a") as f:
            f.write(f"\nlxc.include = {CONF}\n")

    def state(self):
        r = self.lxc("info", "-s", "-H", check=False, timeout=30)
        return r.stdout.decode().strip() if r.returncode == 0 else "?"

    def start(self):
        r = self.lxc("start", "-o", self.log, "-l", "DEBUG", check=False,
                     timeout=60)
        if r.returncode != 0:
            raise AssertionError(
                f"lxc-start {self.name} failed ({r.returncode}): "
                f"{r.stderr.decode(errors='replace')}\n--- log ---\n"
                + self.log_errors())
        self.lxc("wait", "-s", "RUNNING", "-t", "30", timeout=60)
        self.dirty = False
        self._pid = self._freezer = None

    def log_errors(self):
        try:
            with open(self.log, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            return ""
        keep = [ln for ln in lines if " ERROR " in ln or "produced output" in ln]
        return "\n".join(keep[-30:])

    def stop(self, timeout=STOP_DEADLINE):
        self._pid = self._freezer = None
        if self.state() not in ("STOPPED", "?"):
            self.lxc("stop", "-k", check=False, timeout=timeout + 30)
            self.lxc("wait", "-s", "STOPPED", "-t", str(int(timeout)),
                     check=False, timeout=timeout + 30)

    def attach_argv(self, *cmd):
        return ["lxc-attach", "-n", self.name, "-P", self.path,
                "--clear-env", "--", *cmd]

    def sh(self, script, timeout=30):
        """Run a shell command inside; returns (status, stdout, stderr)."""
        r = run(*self.attach_argv("sh", "-c", script), check=False,
                timeout=timeout)
        return r.returncode, r.stdout, r.stderr.decode(errors="replace")

    def ok(self, script, timeout=30):
        rc, out, err = self.sh(script, timeout)
        assert rc == 0, f"in {self.name}: {script!r}: status {rc}: {err}"
        return out

    def read(self, tool, path):
        """The file's bytes as the tool inside the container prints them."""
        r = run(*self.attach_argv(*TOOLS[tool](path)), check=False)
        assert r.returncode == 0, (tool, path, r.returncode, r.stderr)
        return r.stdout

    def popen(self, *cmd):
        p = subprocess.Popen(self.attach_argv(*cmd), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def reap(self):
        while self.procs:
            p = self.procs.pop()
            if p.poll() is None:
                p.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.communicate(timeout=10)

    # --- processes and cgroups, seen from the host ---

    def init_pid(self):
        if self._pid is None:
            self._pid = int(self.lxc("info", "-p", "-H", timeout=30).stdout)
        return self._pid

    def pids(self):
        """Host pids of every process in the container's pid namespace."""
        ns = os.readlink(f"/proc/{self.init_pid()}/ns/pid")
        out = []
        for e in os.scandir("/proc"):
            if e.name.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{e.name}/ns/pid") == ns:
                        out.append(int(e.name))
        return out

    def matching(self, argv):
        """Host pids of the container's processes whose argv is argv
        (busybox dd overwrites the "=" of its arguments with NULs: ignore
        that)."""
        want = ("\0".join(argv) + "\0").replace("=", "\0")
        found = []
        for pid in self.pids():
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/cmdline") as f:
                    if f.read().replace("=", "\0") == want:
                        found.append(pid)
        return found

    def has(self, argv):
        return bool(self.matching(argv))

    def find(self, argv, timeout=10.0):
        """Host pid of the container process whose argv is argv."""
        found = []
        assert wait_until(lambda: found.extend(self.matching(argv)) or found,
                          timeout=timeout, interval=0.02), \
            f"no process {argv} in the container after {timeout}s"
        return found[0]

    def freezer_file(self):
        if self._freezer is None:
            self._freezer = self._find_freezer()
        return self._freezer

    def _find_freezer(self):
        with open(f"/proc/{self.init_pid()}/cgroup") as f:
            lines = f.read().splitlines()
        for ln in lines:
            _, ctrl, path = ln.split(":", 2)
            # A v1 freezer hierarchy that LXC does not use (one mounted
            # beside cgroup v2) holds the container in its root.
            if "freezer" in ctrl.split(",") and path != "/":
                return cgroup_root("freezer") + path + "/freezer.state", "v1"
        for ln in lines:
            if ln.startswith("0::"):
                return cgroup_root(None) + ln[3:] + "/cgroup.events", "v2"
        raise AssertionError("container has no freezer cgroup")

    def freezer_state(self):
        path, version = self.freezer_file()
        with open(path) as f:
            data = f.read()
        if version == "v1":
            return data.strip()
        return "FROZEN" if "frozen 1" in data else "THAWED"

    def thaw_directly(self):
        """Cleanup: lxc-unfreeze does nothing while LXC believes the
        container is FREEZING (an lxc-freeze that never finished)."""
        with contextlib.suppress(OSError, AssertionError, ValueError):
            path, version = self.freezer_file()
            path = path if version == "v1" else path[:-len("cgroup.events")] \
                + "cgroup.freeze"
            with open(path, "w") as f:
                f.write("THAWED" if version == "v1" else "0")


def cgroup_root(controller):
    """Where the v1 hierarchy of controller (None: the v2 one) is mounted."""
    with open("/proc/self/mountinfo") as f:
        for ln in f:
            fields = ln.split()
            sep = fields.index("-")
            fstype, opts = fields[sep + 1], fields[sep + 3].split(",")
            if (fstype == "cgroup2" if controller is None
                    else fstype == "cgroup" and controller in opts):
                return fields[4]
    raise AssertionError(f"no cgroup mount for {controller or 'v2'}")


class DWatch:
    """Samples the container's processes every 20 ms and remembers every
    one that stays in D state for D_STATE_LIMIT seconds while the
    container is not being frozen: a request stuck in the kernel.  (Frozen
    tasks show D too, with the wait they were frozen in as wchan, so the
    samples taken while the freezer is not THAWED are left out; a task
    stuck then keeps the freeze from completing, which the freeze test
    catches.)"""

    def __init__(self, ct):
        self.stuck = {}          # pid -> (comm, wchan)
        self._seen = {}          # pid -> first time seen in D
        self._stop = threading.Event()
        self._ns = os.readlink(f"/proc/{ct.init_pid()}/ns/pid")
        self._freezer = ct.freezer_state
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _thawed(self):
        try:
            return self._freezer() == "THAWED"
        except (OSError, AssertionError, ValueError):
            return True          # the container is gone

    def _sample(self):
        if not self._thawed():
            self._seen.clear()
            return
        now = time.monotonic()
        for e in os.scandir("/proc"):
            if not e.name.isdigit():
                continue
            pid = int(e.name)
            try:
                if os.readlink(f"/proc/{pid}/ns/pid") != self._ns:
                    continue
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
                with open(f"/proc/{pid}/wchan") as f:
                    wchan = f.read().strip()
            except OSError:
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            if stat[stat.rindex(")") + 2] == "D":
                first = self._seen.setdefault(pid, now)
                if now - first >= D_STATE_LIMIT:
                    self.stuck[pid] = (comm, wchan)
            else:
                self._seen.pop(pid, None)

    def _run(self):
        while not self._stop.wait(0.02):
            self._sample()

    def stop(self):
        self._stop.set()
        self._thread.join(5)
        return self.stuck

    def report(self):
        return ", ".join(f"{c} (pid {p}) in D at {w}"
                         for p, (c, w) in sorted(self.stuck.items()))


class BlockedReader:
    """A wakeup_count reader inside the container, parked while a lock is
    held: `tool` is "read" (dd) or "sendfile" (cat).  Like every real
    client it tries again when a read fails (a freeze ends a parked read
    with EINTR, as on the kernel; dd itself reads again), at most 5
    times."""

    PATH = "/sys/power/wakeup_count"

    def __init__(self, ct, tool):
        self.ct, self.tool = ct, tool
        # A path, so that busybox sh execs the applet rather than running
        # it in a forked shell (where /proc/PID/cmdline would be sh's).
        argv = TOOLS[tool](self.PATH)
        self.argv = ("/bin/" + argv[0], *argv[1:])
        mark = conftest.LogMark(ct.pfs)
        self.proc = ct.popen(
            "sh", "-c", f"n=0; until {' '.join(self.argv)}; do "
            "n=$((n+1)); echo retry >&2; [ $n -lt 5 ] || exit 9; done")
        self.pid = ct.find(self.argv)
        self.syscall = self._wait_in_syscall(mark)

    def _wait_in_syscall(self, mark, timeout=10.0):
        nrs = SYSCALLS.get(platform.machine(), {})
        got = []

        def inside():
            try:
                with open(f"/proc/{self.pid}/syscall") as f:
                    nr = f.read().split(" ", 1)[0]
            except OSError:
                return False
            got[:] = [nr]
            tool = self.tool
            if tool == "sendfile" and \
                    mark.page_cache("wakeup_count", self.pid):
                tool = "read"
            want = nrs.get(tool)
            return want is None or nr == want
        ok = wait_until(inside, timeout=timeout, interval=0.02)
        assert ok, (f"{self.argv[0]} never entered {self.tool}(2): "
                    f"/proc/{self.pid}/syscall says {got}")
        # Parked in the host's powerfs, not only queued in the kernel.
        assert wait_until(lambda: conftest.taken(self.pid, self.ct.pfs),
                          timeout=timeout), \
            f"the host's powerfs never took {self.argv[0]}'s read"
        return got[0]

    def blocked(self, secs=0.3):
        """True if the reader has printed nothing and not exited.

        Where sendfile reaches powerfs as a read (before Linux 6.5: the
        reader sat in sendfile, not read), the kernel puts the buffers into
        cat's output pipe before the read is answered (and holds the pipe's
        lock until then), so poll(2) calls the pipe readable while nothing
        can be read from it yet.  There the reader counts as blocked while
        the shell loop is alive and a reader process of its is still in
        the container; result() then checks the bytes it printed."""
        ready, _, _ = select.select([self.proc.stdout], [], [], secs)
        if self.proc.poll() is not None:
            return False
        if not ready:
            return True
        sendfile = SYSCALLS.get(platform.machine(), {}).get("sendfile")
        return self.syscall == sendfile and self.ct.has(self.argv)

    def result(self, timeout=15.0):
        """(status, stdout, number of failed attempts); error output other
        than dd's status lines and the failed attempts' fails the test."""
        out, err = self.proc.communicate(timeout=timeout)
        lines = [ln for ln in err.decode(errors="replace").splitlines()
                 if not DD_STATUS.fullmatch(ln)]
        retries = lines.count("retry")
        assert len(lines) <= 2 * retries, f"reader's errors: {lines}"
        return self.proc.returncode, out, retries


# --- fixtures ----------------------------------------------------------------------

class Env:
    def __init__(self, kind):
        self.kind = kind
        self.pfs = None
        self.ct = None


@pytest.fixture(scope="module", params=["privileged", "unprivileged"])
def env(request):
    """The host's powerfs (as the recipe runs it) and one container."""
    kind = request.param
    if os.geteuid() != 0:
        pytest.skip("LXC tests need root")
    for tool in ("lxc-create", "lxc-start", "lxc-attach", "newuidmap"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} missing: run scripts/install-deps.sh")
    e = Env(kind)
    with contextlib.ExitStack() as stack:
        stack.enter_context(run_power_lock())
        stack.enter_context(mount_points())
        if kind == "unprivileged":
            stack.enter_context(subid_entries())
        lxcpath = tempfile.mkdtemp(prefix="powerfs-lxc-")
        # The unprivileged container's root must reach its rootfs.
        os.chmod(lxcpath, 0o755)
        stack.callback(shutil.rmtree, lxcpath, ignore_errors=True)
        args = ["-o", "allow_other"]
        if kind == "unprivileged":
            args.append(f"--owner={ROOT_BASE[kind]}:{ROOT_BASE[kind]}")
        e.pfs = HostPowerfs(*args).start()
        # Containers hold copies of the mounts: stop them before powerfs.
        stack.callback(e.pfs.stop)
        e.ct = Container(lxcpath, "pfs" + kind[:4], kind)
        e.ct.pfs = e.pfs
        stack.callback(lambda: run("lxc-destroy", "-f", "-n", e.ct.name,
                                   "-P", lxcpath, check=False, timeout=60))
        stack.callback(e.ct.stop)
        stack.callback(e.ct.reap)
        stack.callback(e.ct.thaw_directly)
        stack.callback(release_host_locks)
        e.ct.create()
        e.ct.start()
        yield e


def release_host_locks():
    """Unlock everything and turn autosleep off from the host (this also
    lets a reader stuck in D state finish)."""
    if not os.path.ismount(POWER):
        return
    with contextlib.suppress(OSError):
        for n in host_read(f"{POWER}/wake_lock").split():
            with contextlib.suppress(OSError):
                conftest.open_write_close(f"{POWER}/wake_unlock", n)
        if host_read(f"{POWER}/autosleep") != b"off\n":
            conftest.open_write_close(f"{POWER}/autosleep", b"off")


@pytest.fixture
def ct(env, request):
    """The running container; afterwards locks are gone, autosleep is off,
    the container is thawed, and it is restarted if a test left it in
    doubt."""
    c = env.ct
    if c.dirty or c.state() != "RUNNING":
        c.stop()
        c.start()
    yield c
    rep = getattr(request.node, "rep_call", None)
    failed = rep is None or rep.failed
    if failed:
        release_host_locks()
    c.thaw_directly()
    c.reap()
    if failed:
        c.dirty = True
    env.pfs.check_clean(quiet=failed)


def names_of(listing):
    return listing.split()


def show(data):
    """repr() with long runs of one byte shortened, for messages."""
    return re.sub(r"(.)\1{15,}", lambda m: f"{m.group(1)}*{len(m.group(0))}",
                  repr(data))


# --- tests -------------------------------------------------------------------------

@pytest.mark.parametrize("tool", TOOLS)
def test_state(ct, tool):
    assert host_read(f"{POWER}/state") == EXPECTED_STATE
    assert ct.read(tool, "/sys/power/state") == EXPECTED_STATE


@pytest.mark.parametrize("tool", TOOLS)
def test_wake_lock_and_unlock_bytes(ct, tool):
    """Short, long, then short listings: each read must show the current
    bytes, not a cached or cut copy of an earlier one."""
    long = "lxc_long_" + "x" * 190
    steps = [("wake_lock", "s1", b"s1\n"),
             ("wake_lock", long, (long + " s1\n").encode()),
             ("wake_unlock", long, b"s1\n"),
             ("wake_unlock", "s1", b"\n"),
             ("wake_lock", "s2", b"s2\n"),
             ("wake_unlock", "s2", b"\n")]
    problems = []
    for f, name, active in steps:
        ct.ok(f"echo {name} > /sys/power/{f}")
        host_active = host_read(f"{POWER}/wake_lock")
        host_inactive = host_read(f"{POWER}/wake_unlock")
        assert host_active == active, (f, name)
        got_active = ct.read(tool, "/sys/power/wake_lock")
        got_inactive = ct.read(tool, "/sys/power/wake_unlock")
        if got_active != host_active:
            problems.append(f"after {f} {name[:12]}: wake_lock read "
                            f"{show(got_active)}, host read(2) "
                            f"{show(host_active)}")
        if got_inactive != host_inactive:
            problems.append(f"after {f} {name[:12]}: wake_unlock read "
                            f"{show(got_inactive)}, host read(2) "
                            f"{show(host_inactive)}")
    assert {b"s1", long.encode(), b"s2"} <= set(names_of(host_inactive))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("tool", TOOLS)
def test_wakeup_sources_in_debugfs(ct, tool):
    ct.ok("echo srcx > /sys/power/wake_lock")
    try:
        host = parse_sources(host_read(f"{POWER}/wakeup_sources"))
        for path in ("/sys/kernel/debug/wakeup_sources",
                     "/sys/power/wakeup_sources"):
            data = ct.read(tool, path)
            assert data[:len(SOURCES_HEADER)] == SOURCES_HEADER, (path, data)
            # Times move on; the rows (names, in order) must not.
            assert list(parse_sources(data)) == list(host), path
            assert parse_sources(data)[b"srcx"].active_count >= 1
    finally:
        ct.ok("echo srcx > /sys/power/wake_unlock")


def test_sys_class_keeps_the_containers_classes(ct):
    """/sys/class lists the host kernel's classes plus wakeup, and the
    classes are the container's own sysfs (its net namespace shows lo
    only), read-only as before."""
    classes = set(ct.ok("ls /sys/class").split())
    host = {c.encode() for c in os.listdir("/sys/class")} | {b"wakeup"}
    assert classes == host
    assert ct.ok("ls /sys/class/net") == b"lo\n"
    rc, _, err = ct.sh("mkdir /sys/class/x")
    assert rc != 0 and "Read-only file system" in err, err
    rc, _, err = ct.sh("mkdir /sys/class/net/x")
    assert rc != 0 and "Read-only file system" in err, err


@pytest.mark.parametrize("tool", TOOLS)
def test_class_wakeup_name(ct, tool):
    ct.ok("echo clsname > /sys/power/wake_lock")
    try:
        dirs = [d for d in os.listdir(WAKEUP)
                if host_read(f"{WAKEUP}/{d}/name") == b"clsname\n"]
        assert len(dirs) == 1, dirs
        assert set(ct.ok("ls /sys/class/wakeup").decode().split()) \
            == set(os.listdir(WAKEUP))
        got = ct.read(tool, f"/sys/class/wakeup/{dirs[0]}/name")
        assert got == b"clsname\n"
        got = ct.read(tool, f"/sys/class/wakeup/{dirs[0]}/active_count")
        assert got == host_read(f"{WAKEUP}/{dirs[0]}/active_count")
    finally:
        ct.ok("echo clsname > /sys/power/wake_unlock")


@pytest.mark.parametrize("tool", TOOLS)
def test_wakeup_reasons_in_the_container(ct, tool):
    """Android's suspend service reads /sys/kernel/wakeup_reasons after
    each attempt: the container sees what the host's powerfs recorded."""
    reasons = "/sys/kernel/wakeup_reasons/"
    count = ct.ok("cat /sys/power/wakeup_count").strip().decode()
    # A wakeup event after the handshake: the attempt is aborted.
    rc, _, err = ct.sh(f"echo {count} > /sys/power/wakeup_count &&"
                       f" echo wr > /sys/power/wake_lock &&"
                       f" echo wr > /sys/power/wake_unlock &&"
                       f" echo mem > /sys/power/state")
    assert rc != 0 and "busy" in err, err
    for name in ("last_resume_reason", "last_suspend_time"):
        got = ct.read(tool, reasons + name)
        assert got == host_read(f"{REASONS}/{name}"), name
    assert ct.read(tool, reasons + "last_resume_reason") == \
        b"Abort: Last active Wakeup Source: wr"


def test_sys_kernel_keeps_the_containers_entries(ct):
    """/sys/kernel lists the container's own entries plus wakeup_reasons
    (this kernel has none), read-only as before; what was mounted under it
    (the recipe's debugfs stand-in) is still there."""
    entries = set(ct.ok("ls /sys/kernel").split())
    host = {e.encode() for e in os.listdir("/sys/kernel")}
    assert entries == host | {b"wakeup_reasons"}
    assert set(ct.ok("ls /sys/kernel/wakeup_reasons").split()) == \
        {b"last_resume_reason", b"last_suspend_time"}
    assert ct.ok("head -c 4 /sys/kernel/debug/wakeup_sources") == b"name"
    rc, _, err = ct.sh("mkdir /sys/kernel/x")
    assert rc != 0 and "Read-only file system" in err, err


@pytest.mark.parametrize("tool", TOOLS)
def test_blocked_reader_freeze_unfreeze(ct, tool, record_property):
    """A wakeup_count reader parked inside the container while a lock is
    held: the container is FROZEN within FREEZE_DEADLINE of lxc-freeze, no
    task is ever stuck in D state, and after unfreeze and unlock the
    reader prints the count.  The freeze ends the parked read with EINTR,
    as on the kernel (the freezer wakes the task as a signal would, and
    the kernel's wakeup_count wait then returns -EINTR); the reader reads
    again (dd does so itself; for cat the shell loop may run it once more)
    and parks again until the unlock."""
    ct.ok("echo frz > /sys/power/wake_lock")
    watch = DWatch(ct)
    freeze = None
    problems = []
    try:
        reader = BlockedReader(ct, tool)
        # Long enough for the watch to call a parked reader stuck.
        assert reader.blocked(2 * D_STATE_LIMIT), \
            "reader returned while a lock is held"
        if watch.stuck:
            problems.append("before the freeze: " + watch.report())

        t0 = time.monotonic()
        freeze = subprocess.Popen(
            ["lxc-freeze", "-n", ct.name, "-P", ct.path],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        frozen = wait_until(lambda: ct.freezer_state() == "FROZEN",
                            timeout=FREEZE_DEADLINE + 4.0, interval=0.01)
        took = time.monotonic() - t0
        record_property("freeze_seconds", round(took, 3))
        if not frozen:
            problems.append(f"not FROZEN {took:.1f} s after lxc-freeze "
                            f"(freezer: {ct.freezer_state()})")
            pytest.fail("\n".join(problems), pytrace=False)
        if took > FREEZE_DEADLINE:
            problems.append(f"FROZEN only {took:.2f} s after lxc-freeze")
        assert freeze.wait(10) == 0, freeze.stderr.read()
        assert reader.blocked(0.2), "reader returned while frozen"

        run("lxc-unfreeze", "-n", ct.name, "-P", ct.path, timeout=30)
        assert wait_until(lambda: ct.freezer_state() == "THAWED",
                          timeout=5.0), ct.freezer_state()
        assert reader.blocked(0.3), "reader returned while the lock is held"

        ct.ok("echo frz > /sys/power/wake_unlock")
        rc, out, retries = reader.result()
        assert rc == 0
        assert NUMBER.fullmatch(out), out
        assert out == host_read(f"{POWER}/wakeup_count")
        assert retries <= 1, f"the reader failed {retries} times"
        record_property("reader_retries", retries)
    finally:
        watch.stop()
        if freeze is not None:
            if freeze.poll() is None:      # still waiting for FROZEN
                freeze.kill()
                ct.dirty = True
            freeze.communicate(timeout=10)
        if watch.stuck:
            problems.append(watch.report())
    assert not problems, "\n".join(problems)


def test_autosleep(ct):
    before = int(ct.read("read", "/sys/power/suspend_stats/success"))
    ct.ok("echo mem > /sys/power/autosleep")
    try:
        assert ct.read("read", "/sys/power/autosleep") == b"mem\n"
        assert wait_until(
            lambda: int(ct.read("read", "/sys/power/suspend_stats/success"))
            > before, timeout=15.0, interval=0.2), "no suspend in 15 s"
    finally:
        ct.ok("echo off > /sys/power/autosleep")
    assert ct.read("read", "/sys/power/autosleep") == b"off\n"
    assert host_read(f"{POWER}/autosleep") == b"off\n"


@pytest.mark.parametrize("tool", TOOLS)
def test_stop_with_a_blocked_reader(ct, tool, record_property):
    """lxc-stop -k while a reader is parked: the container stops and the
    reader goes with it, powerfs still serves the host, and a new start of
    the container works.  (D states are the freeze test's business: a
    killable wait shows as D too, and SIGKILL ends it.)"""
    ct.ok("echo stp > /sys/power/wake_lock")
    try:
        reader = BlockedReader(ct, tool)
        assert reader.blocked(0.3)
        t0 = time.monotonic()
        stop = subprocess.Popen(["lxc-stop", "-k", "-n", ct.name,
                                 "-P", ct.path], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        ct.procs.append(stop)
        stopped = wait_until(lambda: ct.state() == "STOPPED",
                             timeout=STOP_DEADLINE, interval=0.1)
        took = time.monotonic() - t0
        record_property("stop_seconds", round(took, 3))
        assert stopped, f"not STOPPED {took:.1f} s after lxc-stop -k"
        assert wait_until(lambda: not os.path.exists(f"/proc/{reader.pid}"),
                          timeout=5.0), "the reader outlived its container"
        reader.proc.communicate(timeout=15)
    finally:
        ct.dirty = True
    assert conftest.timed(host_read, f"{POWER}/state") == EXPECTED_STATE
    assert host_read(f"{POWER}/wake_lock") == b"stp\n"   # locks outlive
    conftest.open_write_close(f"{POWER}/wake_unlock", b"stp")
    assert NUMBER.fullmatch(conftest.timed(host_read,
                                           f"{POWER}/wakeup_count"))
    ct.start()
    assert ct.read("read", "/sys/power/state") == EXPECTED_STATE
    ct.ok("echo again > /sys/power/wake_lock; echo again > "
          "/sys/power/wake_unlock")


def ls_ln(path):
    """(mode string, uid, gid) as `ls -ln` on the host shows them."""
    out = run("ls", "-ln", path).stdout.decode().split()
    return out[0], int(out[2]), int(out[3])


def test_root_writes_all_five_and_chown_chmod_stick(ct, env):
    base = ROOT_BASE[env.kind]
    for f in ("state", "wakeup_count", "autosleep", "wake_lock",
              "wake_unlock"):
        assert ls_ln(f"{POWER}/{f}")[1:] == (base, base), f
    # All five writable files, as the container's root.
    ct.ok("echo w5 > /sys/power/wake_lock")
    assert host_read(f"{POWER}/wake_lock") == b"w5\n"
    ct.ok("echo w5 > /sys/power/wake_unlock")
    assert host_read(f"{POWER}/wake_lock") == b"\n"
    success = int(host_read(f"{POWER}/suspend_stats/success"))
    ct.ok("c=$(head -c 100 /sys/power/wakeup_count) && "
          "echo $c > /sys/power/wakeup_count && echo mem > /sys/power/state",
          timeout=60)
    assert int(host_read(f"{POWER}/suspend_stats/success")) == success + 1
    ct.ok("echo off > /sys/power/autosleep")
    # chown and chmod from inside stick, in both views.
    try:
        ct.ok("chown 1000:1001 /sys/power/wake_lock /sys/power/wake_unlock"
              " && chmod 0660 /sys/power/wake_lock /sys/power/wake_unlock")
        for f in ("wake_lock", "wake_unlock"):
            assert ls_ln(f"{POWER}/{f}") == ("-rw-rw----", base + 1000,
                                             base + 1001), f
        inside = ct.ok("ls -ln /sys/power/wake_lock").split()
        assert (inside[0], inside[2], inside[3]) == (b"-rw-rw----", b"1000",
                                                     b"1001")
        # The root of the container still writes them (CAP_DAC_OVERRIDE in
        # its namespace, which owns the new ids).
        ct.ok("echo w6 > /sys/power/wake_lock && "
              "echo w6 > /sys/power/wake_unlock")
    finally:
        ct.ok("chown 0:0 /sys/power/wake_lock /sys/power/wake_unlock"
              " && chmod 0644 /sys/power/wake_lock /sys/power/wake_unlock")
    assert ls_ln(f"{POWER}/wake_lock") == ("-rw-r--r--", base, base)


def test_hook_binds_over_existing_directories(env):
    """On a kernel that has /sys/class/wakeup and /sys/kernel/wakeup_reasons
    the hook only binds over them.  This kernel has neither, so the shipped
    hook line runs, as LXC runs it, against a stand-in rootfs in a private
    mount namespace."""
    hook = [ln.split("=", 1)[1].strip() for ln in open(CONF)
            if ln.startswith("lxc.hook.mount")]
    assert len(hook) == 1
    root = tempfile.mkdtemp(prefix="powerfs-hook-")
    try:
        for d in ("sys/class/wakeup", "sys/class/net",
                  "sys/kernel/wakeup_reasons", "sys/kernel/mm"):
            os.makedirs(os.path.join(root, d))
        script = (f"{hook[0]} pfs lxc mount && ls {root}/sys/class && "
                  f"ls {root}/sys/class/wakeup && "
                  f"grep -c ' {root}/sys/class' /proc/self/mountinfo && "
                  f"ls {root}/sys/kernel && "
                  f"ls {root}/sys/kernel/wakeup_reasons && "
                  f"grep -c ' {root}/sys/kernel' /proc/self/mountinfo")
        r = run("unshare", "-m", "--propagation", "private", "sh", "-c",
                script, env=dict(os.environ, LXC_ROOTFS_MOUNT=root))
        out = r.stdout.decode().split("\n")
        listing = os.listdir(WAKEUP)
        assert out[:2] == ["net", "wakeup"]
        assert sorted(out[2:2 + len(listing)]) == sorted(listing)
        out = out[2 + len(listing):]
        assert out[0] == "1"      # one mount: the bind
        assert out[1:6] == ["mm", "wakeup_reasons", "last_resume_reason",
                            "last_suspend_time", "1"]
    finally:
        shutil.rmtree(root, ignore_errors=True)
