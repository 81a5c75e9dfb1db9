"""One inode per name, as sysfs has: an open file keeps its path, fstat(fd)
is stat(path), inotify sees what other processes do, times and link counts
are the kernel's (tests/oracle/cases/f1-file-identity.sh and its
transcripts), and concurrent opens cost what one costs.  All this while
every reader stays exact and freezable: no read through the page cache is
ever answered (see tests/test_read_paths.py), so sharing the inode's page
cache costs nothing.

Where the two kernels differ (Linux 6.5 and later read sendfile(2) through
the page cache, 6.1 sends it as read(2)), a test tells which path the kernel
took from what powerfs -d logged, so the module holds on both."""

import ctypes
import errno
import os
import re
import shutil
import signal
import struct
import subprocess
import threading
import time

import pytest

import conftest
from conftest import (PYTHON, ROOT_ENTRIES, STATS_FILES, LogMark,
                      check_cat_path, raises_errno, read_to_eof, wait_until)

SHARED_ARGS = ("--simulate-sleep-ms=100", "-d")

BUSYBOX = shutil.which("busybox")
FILES = [f for f in ROOT_ENTRIES if f != "suspend_stats"] + \
    ["suspend_stats/" + f for f in STATS_FILES]


def other(*argv, check=True):
    """Runs argv in another process; its stdout."""
    r = subprocess.run(argv, capture_output=True, timeout=20)
    if check:
        assert r.returncode == 0, (argv, r.stderr)
    return r.stdout


def write_in_other(path, data):
    """One write(2) without O_TRUNC, by another process."""
    other(PYTHON, "-c", "import os, sys; fd = os.open(sys.argv[1], "
          "os.O_WRONLY); os.write(fd, sys.argv[2].encode())", path, data)


def fields(st):
    return {"ino": st.st_ino, "dev": st.st_dev, "mode": st.st_mode,
            "nlink": st.st_nlink, "uid": st.st_uid, "gid": st.st_gid,
            "size": st.st_size, "atime": st.st_atime_ns,
            "mtime": st.st_mtime_ns, "ctime": st.st_ctime_ns}


# --- the fd's link and fstat ---------------------------------------------------

@pytest.mark.parametrize("name", FILES)
def test_an_open_files_link_keeps_its_path(pfs, name):
    """/proc/PID/fd/N read "PATH (deleted)" as soon as anything looked the
    name up again (each lookup answered a new inode)."""
    path = pfs.path(name)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert os.readlink(f"/proc/self/fd/{fd}") == path
        os.stat(path)
        other("stat", path)
        # (pm_wakeup_irq's read fails with ENODATA: the lookups count.)
        other("cat", path, check=name != "pm_wakeup_irq")
        if BUSYBOX:
            other(BUSYBOX, "cat", path, check=name != "pm_wakeup_irq")
        other("ls", "-l", os.path.dirname(path))
        assert os.readlink(f"/proc/self/fd/{fd}") == path
        assert os.readlink(f"/proc/{os.getpid()}/fd/{fd}") == path
    finally:
        os.close(fd)


def test_a_writers_fd_keeps_its_path_through_writes(pfs):
    """As Android keeps wake_lock and autosleep open and writes again and
    again while others open and read them."""
    wl = pfs.path("wake_lock")
    fd = os.open(wl, os.O_WRONLY)
    try:
        for i in range(20):
            os.write(fd, b"fdlink-%d" % i)
            write_in_other(pfs.path("wake_unlock"), "fdlink-%d" % i)
            read_to_eof(wl)
            assert os.readlink(f"/proc/self/fd/{fd}") == wl
    finally:
        os.close(fd)


@pytest.mark.parametrize("name", ["wake_lock", "wakeup_sources",
                                  "suspend_stats/success"])
def test_fstat_is_stat_whatever_others_did(pfs, name):
    path = pfs.path(name)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert fields(os.fstat(fd)) == fields(os.stat(path))
        other("chmod", "0644" if name == "wake_lock" else "0444", path)
        assert fields(os.fstat(fd)) == fields(os.stat(path))
        if name == "wake_lock":
            write_in_other(path, "fstat-x")
            assert fields(os.fstat(fd)) == fields(os.stat(path))
            other("sh", "-c", f"echo fstat-x > {pfs.path('wake_unlock')}")
            other("sh", "-c", f"echo fstat-y > {path}")
            assert fields(os.fstat(fd)) == fields(os.stat(path))
            write_in_other(pfs.path("wake_unlock"), "fstat-y")
        read_to_eof(path)
        assert fields(os.fstat(fd)) == fields(os.stat(path))
    finally:
        os.close(fd)


def test_readdir_stat_and_fstat_give_one_inode_number(pfs):
    for d in ("", "suspend_stats"):
        with os.scandir(pfs.path(d)) as it:
            for e in it:
                st = os.stat(e.path)
                assert e.inode() == st.st_ino, e.path
                if e.is_file():
                    fd = os.open(e.path, os.O_RDONLY)
                    try:
                        assert os.fstat(fd).st_ino == st.st_ino
                    finally:
                        os.close(fd)


def test_link_counts_are_the_kernels(pfs):
    """Oracle f1: /sys/power 3 (2 + suspend_stats/), suspend_stats 2,
    every file 1."""
    assert os.stat(pfs.path()).st_nlink == 3
    assert os.stat(pfs.path("suspend_stats")).st_nlink == 2
    for name in FILES:
        assert os.stat(pfs.path(name)).st_nlink == 1, name


# --- inotify -------------------------------------------------------------------

IN = {"ACCESS": 0x1, "MODIFY": 0x2, "ATTRIB": 0x4, "CLOSE_WRITE": 0x8,
      "CLOSE_NOWRITE": 0x10, "OPEN": 0x20}
IN_ALL_EVENTS = 0xfff
_libc = ctypes.CDLL(None, use_errno=True)


class Watch:
    """An inotify watch on path (every event)."""

    def __init__(self, path):
        self.fd = _libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        wd = _libc.inotify_add_watch(self.fd, path.encode(), IN_ALL_EVENTS)
        assert wd >= 0, os.strerror(ctypes.get_errno())

    def events(self, want):
        """The events so far, as ["OPEN", ...] (with ":name" for a
        directory's child), waiting until there are at least want."""
        out = []

        def more():
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return len(out) >= want
            at = 0
            while at < len(data):
                _, mask, _, n = struct.unpack_from("iIII", data, at)
                name = data[at + 16:at + 16 + n].rstrip(b"\0").decode()
                ev = "|".join(k for k, v in IN.items() if mask & v)
                out.append(ev + (":" + name if name else ""))
                at += 16 + n
            return len(out) >= want
        wait_until(more, timeout=2)
        more()
        return out

    def close(self):
        os.close(self.fd)


# What the host's own sysfs reports (Linux 6.18, /sys/power/pm_freeze_timeout:
# the oracle kernel has no inotify): OPEN, ACCESS for a read that returned
# data, MODIFY for a write that succeeded (none for one that failed), and
# CLOSE_WRITE or CLOSE_NOWRITE.
READ = ["OPEN", "ACCESS", "CLOSE_NOWRITE"]
WRITE = ["OPEN", "MODIFY", "CLOSE_WRITE"]


@pytest.mark.parametrize("name", ["wake_lock", "wakeup_count", "state",
                                  "wakeup_sources", "suspend_stats/fail"])
def test_inotify_sees_another_process_read(pfs, name):
    w = Watch(pfs.path(name))
    try:
        other(PYTHON, "-c", "import os, sys; fd = os.open(sys.argv[1], "
              "os.O_RDONLY); os.read(fd, 100)", pfs.path(name))
        assert w.events(3) == READ
    finally:
        w.close()


@pytest.mark.skipif(not BUSYBOX, reason="busybox is not installed")
def test_inotify_sees_busybox_cat(pfs):
    """One ACCESS, whether cat's sendfile came through (Linux 6.1) or was
    refused and cat read(2) instead (6.5 and later)."""
    w = Watch(pfs.path("state"))
    try:
        other(BUSYBOX, "cat", pfs.path("state"))
        assert w.events(3) == READ
    finally:
        w.close()


def test_inotify_sees_another_process_write(pfs):
    w = Watch(pfs.path("wake_lock"))
    try:
        write_in_other(pfs.path("wake_lock"), "inotify-w")
        assert w.events(3) == WRITE
        write_in_other(pfs.path("wake_unlock"), "inotify-w")
        # A write that fails: no MODIFY.
        r = other(PYTHON, "-c", "import os, sys\nfd = os.open(sys.argv[1], "
                  "os.O_WRONLY)\ntry:\n    os.write(fd, b' ')\nexcept OSError "
                  "as e:\n    print(e.errno)", pfs.path("wake_lock"))
        assert r == b"%d\n" % errno.EINVAL
        assert w.events(2) == ["OPEN", "CLOSE_WRITE"]
    finally:
        w.close()


def test_inotify_on_the_directory_names_the_files(pfs):
    w = Watch(pfs.path())
    try:
        other(PYTHON, "-c", "import os, sys; fd = os.open(sys.argv[1], "
              "os.O_RDONLY); os.read(fd, 100)", pfs.path("state"))
        write_in_other(pfs.path("wake_lock"), "inotify-d")
        write_in_other(pfs.path("wake_unlock"), "inotify-d")
        assert w.events(9) == [e + ":state" for e in READ] + \
            [e + ":wake_lock" for e in WRITE] + \
            [e + ":wake_unlock" for e in WRITE]
    finally:
        w.close()


# --- times ---------------------------------------------------------------------

class Times:
    """Which of atime, mtime, ctime moved since the last look."""

    def __init__(self, path):
        self.path = path
        self.last = os.stat(path)

    def moved(self):
        st = os.stat(self.path)
        out = {k for k in ("atime", "mtime", "ctime")
               if getattr(st, f"st_{k}_ns") != getattr(self.last,
                                                       f"st_{k}_ns")}
        self.last = st
        return out


def test_reads_and_writes_leave_times_alone(mount):
    """Oracle f1: read(2), pread, write(2) (succeeding or failing) move no
    time of a sysfs or debugfs file."""
    p = mount()
    t = Times(p.path("wake_lock"))
    fd = os.open(p.path("wake_lock"), os.O_RDWR)
    try:
        os.read(fd, 100)
        assert t.moved() == set()
        os.pread(fd, 100, 0)
        assert t.moved() == set()
        os.write(fd, b"times-w")
        assert t.moved() == set()
        with pytest.raises(OSError):
            os.write(fd, b"\n")
        assert t.moved() == set()
    finally:
        os.close(fd)
        p.unlock("times-w")
    for name in ("wakeup_sources", "state", "suspend_stats/success"):
        t = Times(p.path(name))
        read_to_eof(p.path(name))
        read_to_eof(p.path(name))
        assert t.moved() == set(), name


def test_a_truncating_open_moves_mtime_and_ctime(mount):
    """Oracle f1: a shell's `echo x > file` truncates: mtime and ctime move
    (a failing write after it too), and all three at a file's first
    change of attributes (kernfs then starts keeping them)."""
    p = mount()
    t = Times(p.path("wake_lock"))
    other("sh", "-c", f"echo times-t > {p.path('wake_lock')}")
    assert t.moved() == {"atime", "mtime", "ctime"}
    other("sh", "-c", f"echo times-t > {p.path('wake_lock')}")
    assert t.moved() == {"mtime", "ctime"}
    p.unlock("times-t")
    assert t.moved() == set()
    t = Times(p.path("wake_unlock"))
    r = subprocess.run(["sh", "-c", f"echo times-none > "
                        f"{p.path('wake_unlock')}"], capture_output=True)
    assert r.returncode != 0
    assert t.moved() == {"atime", "mtime", "ctime"}


def test_chmod_chown_touch_and_truncate_move_times(mount):
    """Oracle f1: a file's first setattr moves all three times, later ones
    ctime and what they set; touch -d sets atime and mtime."""
    p = mount()
    path = p.path("wake_unlock")
    t = Times(path)
    os.chmod(path, 0o644)
    assert t.moved() == {"atime", "mtime", "ctime"}
    os.chown(path, 0, 0)
    assert t.moved() == {"ctime"}
    os.chmod(path, 0o644)
    assert t.moved() == {"ctime"}
    os.utime(path, ns=(981173106000000000, 981173106000000000))
    assert t.moved() == {"atime", "mtime", "ctime"}
    st = os.stat(path)
    assert (st.st_atime_ns, st.st_mtime_ns) == (981173106000000000,
                                                981173106000000000)
    other("touch", "-a", path)
    assert t.moved() == {"atime", "ctime"}
    other("touch", "-m", path)
    assert t.moved() == {"mtime", "ctime"}
    os.truncate(path, 0)
    assert t.moved() == {"mtime", "ctime"}
    assert os.stat(path).st_size == 4096


@pytest.mark.parametrize("name", ["state", "wakeup_sources"])
def test_sendfile_marks_the_file_accessed(mount, name):
    """Oracle f1: the kernel's sendfile marks the file accessed, spliced or
    not (debugfs wakeup_sources cannot be), and sysfs and debugfs are
    mounted relatime: the first sendfile since the last change moves atime,
    the next one does not.  powerfs sees the sendfile where it comes
    through the page cache (Linux 6.5 and later); before, it comes as
    read(2) does and moves nothing (a deviation)."""
    p = mount("-d")
    path = p.path(name)
    t = Times(path)
    for first in (True, False):
        mark = LogMark(p)
        fd = os.open(path, os.O_RDONLY)
        r, w = os.pipe()
        try:
            try:
                os.sendfile(w, fd, None, 4096)
            except OSError as e:
                assert e.errno == errno.EINVAL
        finally:
            for f in (fd, r, w):
                os.close(f)
        if mark.page_cache(name):
            assert t.moved() == ({"atime"} if first else set())
        else:
            assert t.moved() == set()


# --- every reader, exact and freezable -----------------------------------------

@pytest.mark.skipif(not BUSYBOX, reason="busybox is not installed")
@pytest.mark.parametrize("name", FILES)
def test_busybox_cat_is_exact_while_another_fd_is_open(pfs, name):
    """The page cache is the inode's, shared with the fd held open (and its
    reads): busybox cat (sendfile, else read(2)) still gives read(2)'s
    bytes, before and after the content changes."""
    path = pfs.path(name)
    lock = "cat-open-" + "x" * 50
    # An active lock blocks wakeup_count and keeps wakeup_sources' times
    # moving: those two are compared with nothing active.
    still = name in ("wakeup_count", "wakeup_sources")
    held = os.open(path, os.O_RDONLY)
    if name == "pm_wakeup_irq":
        # No IRQ woke a simulated sleep: read(2) and cat both say so.
        try:
            with raises_errno(errno.ENODATA):
                os.read(held, 4096)
            r = subprocess.run([BUSYBOX, "cat", path], capture_output=True,
                               timeout=20)
            assert (r.returncode, r.stdout) == (1, b"")
            assert b"No data available" in r.stderr
        finally:
            os.close(held)
        return
    try:
        os.read(held, 4096)
        for step in ("before", "locked", "unlocked"):
            if step == "locked":
                pfs.lock(lock)
            elif step == "unlocked":
                pfs.unlock(lock)
            if still and step == "locked":
                continue
            assert other(BUSYBOX, "cat", path) == read_to_eof(path), step
            assert other(BUSYBOX, "cat", path) == read_to_eof(path), step
    finally:
        os.close(held)
        if lock.encode() in pfs.active():
            pfs.unlock(lock)


def proc_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def never_in_d_state(pid, secs=0.3):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if proc_state(pid) == "D":
            return False
        time.sleep(0.005)
    return True


class Freezer:
    """A cgroup of its own with the v1 freezer, else the v2 one."""

    V1 = "/sys/fs/cgroup/freezer"
    V2 = [d for d in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")
          if os.path.exists(os.path.join(d, "cgroup.subtree_control"))]

    def __init__(self, tag):
        if os.path.exists(os.path.join(self.V1, "freezer.state")) or \
                os.path.exists(os.path.join(self.V1, "cgroup.procs")):
            self.v1, root = True, self.V1
        elif self.V2:
            self.v1, root = False, self.V2[0]
        else:
            pytest.skip("no cgroup freezer (v1 or v2) here")
        self.cg = os.path.join(root, f"powerfs-identity-{os.getpid()}-{tag}")
        os.mkdir(self.cg)

    def _write(self, name, value):
        with open(os.path.join(self.cg, name), "w") as f:
            f.write(value)

    def add(self, pid):
        self._write("cgroup.procs", str(pid))

    def freeze(self):
        self._write("freezer.state" if self.v1 else "cgroup.freeze",
                    "FROZEN" if self.v1 else "1")

    def frozen(self):
        if self.v1:
            with open(os.path.join(self.cg, "freezer.state")) as f:
                return f.read().strip() == "FROZEN"
        with open(os.path.join(self.cg, "cgroup.events")) as f:
            return "frozen 1" in f.read()

    def thaw(self):
        self._write("freezer.state" if self.v1 else "cgroup.freeze",
                    "THAWED" if self.v1 else "0")

    def remove(self):
        self.thaw()
        deadline = time.monotonic() + 5
        while True:
            try:
                os.rmdir(self.cg)
                return
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)


@pytest.mark.skipif(not BUSYBOX, reason="busybox is not installed")
def test_two_busybox_cats_of_a_blocked_wakeup_count(pfs):
    """Both wait interruptibly (S, never D), whichever path the kernel
    made cat's sendfile take; each takes SIGSTOP and SIGCONT; both freeze
    within a second and, thawed, print the count once the lock goes."""
    n = pfs.count()
    pfs.lock("held")
    fz = Freezer("cats")
    mark = LogMark(pfs)
    procs = [subprocess.Popen([BUSYBOX, "cat", pfs.path("wakeup_count")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    try:
        paths = []
        for p in procs:
            assert wait_until(lambda: proc_state(p.pid) in ("S", "D") and
                              open(f"/proc/{p.pid}/syscall").read().split()[0]
                              in ("0", "40", "63", "71"), timeout=5)
            assert never_in_d_state(p.pid)
            paths.append(check_cat_path(mark, p.pid))
            assert proc_state(p.pid) == "S"
        assert paths[0] == paths[1]
        for p in procs:
            p.send_signal(signal.SIGSTOP)
            assert wait_until(lambda: proc_state(p.pid) == "T", timeout=2)
            p.send_signal(signal.SIGCONT)
            assert wait_until(lambda: proc_state(p.pid) == "S", timeout=2)
        for p in procs:
            fz.add(p.pid)
        t0 = time.monotonic()
        fz.freeze()
        assert wait_until(fz.frozen, timeout=1.0), \
            f"not frozen after {time.monotonic() - t0:.2f} s: " + \
            ", ".join(proc_state(p.pid) for p in procs)
        fz.thaw()
        for p in procs:
            assert never_in_d_state(p.pid, 0.1)
            assert p.poll() is None, "a reader gave up with the lock held"
        pfs.unlock("held")
        for p in procs:
            out, err = p.communicate(timeout=5)
            assert (p.returncode, out) == (0, b"%d\n" % (n + 1)), err
    finally:
        pfs.unlock("held")
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        fz.remove()


# --- what concurrent opens cost -------------------------------------------------

HOLD_LINE = re.compile(r"loop hold [\d.]+ s: (.*)")


def request_counts(log):
    """Requests of each kind powerfs -d counted in its loop-hold lines."""
    out = {}
    for m in HOLD_LINE.finditer(log):
        for part in m.group(1).split("; "):
            kind, _, rest = part.partition(" n=")
            out[kind] = out.get(kind, 0) + int(rest.split()[0])
    return out


def test_concurrent_opens_cost_one_lookup(mount):
    """300 opens of one name by 30 threads at once made 22,512 LOOKUPs
    when each lookup answered a new inode (every one invalidated the
    others' walks).  With one inode the name is looked up once."""
    p = mount("-d")
    path = p.path("wakeup_count")
    barrier = threading.Barrier(30)

    def opener():
        barrier.wait()
        for _ in range(10):
            os.close(os.open(path, os.O_RDONLY))
    threads = [threading.Thread(target=opener) for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # The counts come in a line once a second of requests: poke until the
    # opens' second has been reported.
    before = len(p.log())

    def reported():
        read_to_eof(p.path("state"))
        return request_counts(p.log()).get("open", 0) >= 300
    assert wait_until(reported, timeout=10, interval=0.2), p.log()[before:]
    counts = request_counts(p.log())
    assert counts.get("lookup", 0) <= 3, counts


# --- an upgrade from a server that answered every lookup with a new inode -----

def build_before_identity():
    """A powerfs built from the last commit whose server answered every
    lookup of a file with a new inode (built once, kept under /tmp), or
    skip where there is no git history or compiler (the VM)."""
    git, make = shutil.which("git"), shutil.which("make")
    if not git or not make or not (conftest.REPO / ".git").exists():
        pytest.skip("no git history or make here to build the server from "
                    "before one inode per name")
    log = subprocess.run([git, "-C", str(conftest.REPO), "log", "-1",
                          "--format=%H", "-S", "clone_ino(", "--",
                          "src/fs.c"], capture_output=True, text=True)
    rev = log.stdout.strip()
    if log.returncode != 0 or not rev:
        pytest.skip("no commit with clone_ino() in this history")
    for cand in (rev, rev + "^"):
        src = subprocess.run([git, "-C", str(conftest.REPO), "show",
                              f"{cand}:src/fs.c"], capture_output=True)
        if b"clone_ino(" in src.stdout:
            rev = subprocess.run([git, "-C", str(conftest.REPO), "rev-parse",
                                  cand], capture_output=True,
                                 text=True).stdout.strip()
            break
    top = f"/tmp/powerfs-before-identity-{rev[:12]}"
    exe = os.path.join(top, "build", "default", "powerfs")
    if not os.access(exe, os.X_OK):
        shutil.rmtree(top, ignore_errors=True)
        os.makedirs(top)
        archive = subprocess.Popen([git, "-C", str(conftest.REPO), "archive",
                                    rev], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", top], stdin=archive.stdout,
                       check=True)
        assert archive.wait() == 0
        r = subprocess.run([make, "-C", top, "-j2", exe[len(top) + 1:]],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
    return exe


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_an_upgrade_from_a_server_that_cloned_inodes(tmp_path, monkeypatch):
    """A live upgrade (SIGHUP: the keeper runs the binary on disk) from a
    server that answered every lookup with a new inode: the kernel holds
    those numbers, the file's row in their low 8 bits.  The new server
    decodes them: an fd opened before the upgrade reads and writes; and the
    name's next path walk finds its one inode, whose fds keep their path.
    (Without the decoding, the new server crashed on the old numbers.)"""
    exe = tmp_path / "powerfs"
    shutil.copy2(build_before_identity(), exe)
    monkeypatch.setattr(conftest, "POWERFS", str(exe))
    p = conftest.Powerfs("-d").start()
    fds = []
    try:
        wl = p.path("wake_lock")
        old = os.open(wl, os.O_RDWR)
        fds.append(old)
        os.stat(wl)
        before = os.fstat(old)
        # The upgrade: the binary on disk becomes this tree's.
        shutil.copy2(conftest.POWERFS_BUILT, tmp_path / "powerfs.new")
        os.replace(tmp_path / "powerfs.new", exe)
        server = p.server_pid()
        os.kill(p.proc.pid, signal.SIGHUP)
        assert wait_until(lambda: gone(server), timeout=10)
        assert read_to_eof(p.path("state")) == b"freeze mem disk\n"
        assert "taking the connection over" in p.log()
        # The fd on an inode of the old server's.
        assert os.write(old, b"upgrade-1") == 9
        assert os.pread(old, 100, 0) == b"upgrade-1\n"
        assert os.fstat(old).st_mode == before.st_mode
        # The next walk: the one inode.
        fd = os.open(wl, os.O_RDONLY)
        fds.append(fd)
        other("stat", wl)
        other("cat", wl)
        write_in_other(wl, "upgrade-2")
        assert os.readlink(f"/proc/self/fd/{fd}") == wl
        assert fields(os.fstat(fd)) == fields(os.stat(wl))
        # Both name the file by its number now.
        assert os.fstat(fd).st_ino == os.fstat(old).st_ino
        p.unlock("upgrade-1", "upgrade-2")
    finally:
        for fd in fds:
            os.close(fd)
        p.stop()
