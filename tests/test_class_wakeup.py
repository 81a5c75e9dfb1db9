"""--class-wakeup=DIR: the wakeup sources as the kernel's /sys/class/wakeup
(drivers/base/power/wakeup_stats.c), a second mount served by the same
process.  One wakeupN/ directory per source (N: the lowest id free when the
source was registered), ten read-only files in each."""

import errno
import os
import re
import signal
import stat
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import (FUSERMOUNT, POWERFS, ExtraMounts, mounts_of,
                      open_read_close, raises_errno, run_in_child,
                      wait_until)

FILES = ("name", "active_count", "event_count", "wakeup_count",
         "expire_count", "active_time_ms", "total_time_ms", "max_time_ms",
         "last_change_ms", "prevent_suspend_time_ms")
COUNTERS = FILES[1:5]            # "%lu\n"
TIMES = FILES[5:]                # "%lld\n"
NUMBER = re.compile(rb"(0|[1-9][0-9]*)\n")


class ClassWakeup(ExtraMounts):
    """powerfs with --class-wakeup on a second directory (self.cw)."""

    def __init__(self, *args):
        super().__init__(*args, extra=("class-wakeup",))
        self.cw = self.extra["class-wakeup"]

    # --- the class mount ----------------------------------------------------

    def cpath(self, *parts):
        return os.path.join(self.cw, *parts)

    def dirs(self):
        return sorted(os.listdir(self.cw), key=lambda d: int(d[6:]))

    def cread(self, *parts):
        """One open, one read(2) of 8192 bytes."""
        return open_read_close(self.cpath(*parts))

    def by_name(self):
        """name -> directory, for every wakeupN."""
        out = {}
        for d in os.listdir(self.cw):
            name = self.cread(d, "name")
            assert name.endswith(b"\n")
            assert name[:-1] not in out, (name, d, out)
            out[name[:-1]] = d
        return out

    def values(self, d):
        """The nine numbers of wakeupN, by file name."""
        return {f: int(self.cread(d, f)) for f in FILES[1:]}


@pytest.fixture
def cwfs():
    """Factory: cwfs("--wakelock-gc-seconds=0", ...) starts a server with
    both mounts; all are stopped (and checked) at the end of the test."""
    yield from mounts_of(ClassWakeup)


def test_autosleep_source_at_start(cwfs):
    p = cwfs()
    assert os.listdir(p.cw) == ["wakeup0"]
    assert sorted(os.listdir(p.cpath("wakeup0"))) == sorted(FILES)
    assert p.cread("wakeup0", "name") == b"autosleep\n"
    v = p.values("wakeup0")
    assert all(v[f] == 0 for f in FILES[1:] if f != "last_change_ms"), v
    # "deleted" is a row of wakeup_sources, not a device.
    assert b"deleted" not in p.by_name()


def test_lock_makes_a_directory(cwfs):
    p = cwfs()
    p.lock("foo")
    assert p.dirs() == ["wakeup0", "wakeup1"]
    assert p.cread("wakeup1", "name") == b"foo\n"
    assert p.cread("wakeup1", "active_count") == b"1\n"
    assert p.cread("wakeup1", "event_count") == b"1\n"
    assert p.cread("wakeup1", "wakeup_count") == b"0\n"
    assert p.cread("wakeup1", "expire_count") == b"0\n"
    t1 = int(p.cread("wakeup1", "active_time_ms"))
    time.sleep(0.1)                      # held 0.1 s more, on purpose
    t2 = int(p.cread("wakeup1", "active_time_ms"))
    assert t2 >= t1 + 90, (t1, t2)
    # Total and max include the current activation.
    assert int(p.cread("wakeup1", "total_time_ms")) >= t2
    assert int(p.cread("wakeup1", "max_time_ms")) >= t2
    last = int(p.cread("wakeup1", "last_change_ms"))
    assert last == p.source("foo").last_change
    p.unlock("foo")


def test_unlock_and_relock_update_counts(cwfs):
    p = cwfs()
    p.lock("foo")
    time.sleep(0.05)                     # held 50 ms, on purpose
    p.unlock("foo")
    v = p.values("wakeup1")
    assert v["active_count"] == 1 and v["event_count"] == 1, v
    assert v["active_time_ms"] == 0, v
    assert v["total_time_ms"] >= 50 and v["total_time_ms"] == \
        v["max_time_ms"], v
    time.sleep(0.02)                     # a window of 20 ms
    assert p.values("wakeup1") == v      # nothing moves while inactive
    p.lock("foo")
    p.lock("foo")                        # an event on an active source
    v2 = p.values("wakeup1")
    assert v2["event_count"] == 3, v2
    assert v2["active_count"] == 2, v2
    assert v2["last_change_ms"] > v["last_change_ms"], (v, v2)
    p.unlock("foo")


def test_same_numbers_as_wakeup_sources(cwfs):
    p = cwfs()
    p.lock("a", "b", "c")
    p.write("wake_lock", b"t 1000000")   # a 1 ms timeout: expires
    assert wait_until(lambda: p.source("t").expire_count == 1)
    p.unlock("a", "b")
    p.write("autosleep", b"off")         # one event on "autosleep"
    by_name = p.by_name()
    assert set(by_name) == {b"autosleep", b"a", b"b", b"c", b"t"}
    p.unlock("c")
    src = p.sources()
    for name, d in by_name.items():
        s = src[name]
        v = p.values(d)
        assert (v["active_count"], v["event_count"], v["wakeup_count"],
                v["expire_count"], v["active_time_ms"], v["total_time_ms"],
                v["max_time_ms"], v["last_change_ms"],
                v["prevent_suspend_time_ms"]) == tuple(s), (name, v, s)
    assert p.values(by_name[b"t"])["expire_count"] == 1
    assert p.values(by_name[b"autosleep"])["event_count"] == 1


def test_ids_are_lowest_free_and_listing(cwfs):
    p = cwfs()
    names = [f"lock{i}".encode() for i in range(40)]
    p.lock(*names)
    assert p.dirs() == [f"wakeup{i}" for i in range(41)]
    for i, n in enumerate(names):
        assert p.cread(f"wakeup{i + 1}", "name") == n + b"\n"
    p.unlock(*names)


def test_wakeup_count_column(cwfs):
    p = cwfs()
    c = p.count()
    assert p.write("wakeup_count", str(c)) == len(str(c))   # armed
    p.lock("w")
    assert p.cread("wakeup1", "wakeup_count") == b"1\n"
    p.unlock("w")


def test_prevent_suspend_time(cwfs):
    p = cwfs("--simulate-sleep-ms=50")
    p.lock("hold")
    p.write("autosleep", b"mem")
    time.sleep(0.1)                      # 0.1 s with autosleep on, on purpose
    v = p.values("wakeup1")
    assert v["prevent_suspend_time_ms"] >= 90, v
    p.write("autosleep", b"off")
    p.unlock("hold")
    assert p.cread("wakeup0", "event_count") == b"2\n"


def test_gc_removes_the_directory_and_reuses_its_id(cwfs):
    p = cwfs("--wakelock-gc-seconds=0")
    p.lock("keep")                       # active: never collected
    p.lock("foo")
    assert p.by_name() == {b"autosleep": "wakeup0", b"keep": "wakeup1",
                           b"foo": "wakeup2"}
    fd = os.open(p.cpath("wakeup2", "name"), os.O_RDONLY)
    try:
        p.unlock("foo")
        for _ in range(99):
            p.lock("foo")
            p.unlock("foo")
        assert os.path.isdir(p.cpath("wakeup2"))     # 100 unlocks
        p.lock("foo")
        p.unlock("foo")                  # the 101st starts a collection
        assert wait_until(lambda: not os.path.exists(p.cpath("wakeup2")))
        with raises_errno(errno.ENOENT):
            os.stat(p.cpath("wakeup2"))
        with raises_errno(errno.ENOENT):
            os.open(p.cpath("wakeup2", "name"), os.O_RDONLY)
        assert p.dirs() == ["wakeup0", "wakeup1"]
        # An attribute kept open reads like one of a removed device.
        with raises_errno(errno.ENODEV):
            os.pread(fd, 8192, 0)
        p.lock("bar")                    # the next new source takes id 2
        assert p.dirs() == ["wakeup0", "wakeup1", "wakeup2"]
        assert p.cread("wakeup2", "name") == b"bar\n"
        assert p.cread("wakeup2", "active_count") == b"1\n"
        with raises_errno(errno.ENODEV):  # still not the new source
            os.pread(fd, 8192, 0)
    finally:
        os.close(fd)
    p.unlock("bar", "keep")


def test_file_formats(cwfs):
    p = cwfs()
    p.lock("fmt")
    p.write("wake_lock", b"exp 1000000")
    assert wait_until(lambda: p.source("exp").expire_count == 1)
    for d in ("wakeup0", "wakeup1", "wakeup2"):
        for f in FILES:
            data = p.cread(d, f)
            if f == "name":
                assert data in (b"autosleep\n", b"fmt\n", b"exp\n"), data
            else:
                assert NUMBER.fullmatch(data), (d, f, data)
    assert p.cread("wakeup2", "expire_count") == b"1\n"
    p.unlock("fmt")


def test_reads_follow_sysfs_rules(cwfs):
    p = cwfs()
    p.lock("reader")
    fd = os.open(p.cpath("wakeup1", "active_time_ms"), os.O_RDONLY)
    try:
        first = os.read(fd, 1)                 # generates a snapshot
        rest = os.read(fd, 8192)               # continues from it
        assert NUMBER.fullmatch(first + rest)
        assert os.read(fd, 8192) == b""        # used up: 0 at once
        time.sleep(0.05)                       # the time grows 50 ms
        os.lseek(fd, 0, os.SEEK_SET)
        again = os.read(fd, 8192)              # offset 0: fresh
        assert int(again) >= int(first + rest) + 40
    finally:
        os.close(fd)
    # An offset the open file has no snapshot for: generated, served
    # from that offset.
    fd = os.open(p.cpath("wakeup1", "name"), os.O_RDONLY)
    try:
        assert os.pread(fd, 8192, 3) == b"der\n"
    finally:
        os.close(fd)
    p.unlock("reader")


def test_page_cache_readers_never_see_zeros(cwfs):
    """busybox cat reads (sendfile, read(2) if it fails) of an attribute
    whose source counts events, while a lookup loop walks the path: an
    answered page-cache read came out padded with zeros (2 in 5 here),
    each lookup's attributes moving the inode under it."""
    p = cwfs()
    p.lock("pcache")
    p.unlock("pcache")
    path = p.cpath("wakeup1", "event_count")
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            p.lock("pcache")
            p.unlock("pcache")

    def walker():
        while not stop.is_set():
            os.stat(path)
    threads = [threading.Thread(target=churn), threading.Thread(target=walker)]
    for t in threads:
        t.start()
    got = []
    try:
        r, w = os.pipe()
        for _ in range(2000):
            fd = os.open(path, os.O_RDONLY)
            try:
                n = os.sendfile(w, fd, None, 4096)
                got.append(os.read(r, n) if n else b"")
            except OSError as e:
                assert e.errno == errno.EINVAL
                got.append(os.read(fd, 4096))
            finally:
                os.close(fd)
        os.close(r)
        os.close(w)
    finally:
        stop.set()
        for t in threads:
            t.join()
    bad = [g for g in got if not NUMBER.fullmatch(g)]
    assert not bad, f"{len(bad)} of {len(got)} wrong, e.g. {bad[0][:40]!r}"


def test_long_name_is_cut_like_sysfs_emit(cwfs):
    p = cwfs()
    name = b"n" * 4096
    assert p.write("wake_lock", name) == 4096
    # sysfs_emit() writes at most PAGE_SIZE - 1 bytes.
    assert p.cread("wakeup1", "name") == name[:4095]
    p.unlock(name)


def test_modes_and_read_only(cwfs):
    p = cwfs("-o", "allow_other")        # -o applies to both mounts
    for path, mode in ((p.cw, stat.S_IFDIR | 0o755),
                       (p.cpath("wakeup0"), stat.S_IFDIR | 0o755)):
        st = os.stat(path)
        assert st.st_mode == mode, (path, oct(st.st_mode))
        assert (st.st_uid, st.st_gid) == (0, 0)
    for f in FILES:
        path = p.cpath("wakeup0", f)
        st = os.stat(path)
        assert st.st_mode == stat.S_IFREG | 0o444, (f, oct(st.st_mode))
        assert (st.st_uid, st.st_gid, st.st_size) == (0, 0, 4096)
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC,
                      os.O_WRONLY | os.O_APPEND):
            with raises_errno(errno.EACCES):
                os.open(path, flags)
    # Another user may read but not write.
    path = p.cpath("wakeup0", "name")
    assert run_in_child(open_read_close, path, uid=65534,
                        gid=65534) == b"autosleep\n"


def test_tree_cannot_change(cwfs):
    p = cwfs()
    with raises_errno(errno.EACCES):
        os.open(p.cpath("wakeup0", "new"), os.O_WRONLY | os.O_CREAT, 0o644)
    with raises_errno(errno.EACCES):
        os.open(p.cpath("wakeup7"), os.O_WRONLY | os.O_CREAT, 0o644)
    with raises_errno(errno.EPERM):
        os.mkdir(p.cpath("wakeup5"))
    with raises_errno(errno.EPERM):
        os.unlink(p.cpath("wakeup0", "name"))
    with raises_errno(errno.EPERM):
        os.rmdir(p.cpath("wakeup0"))
    with raises_errno(errno.EPERM):
        os.rename(p.cpath("wakeup0"), p.cpath("wakeup9"))
    with raises_errno(errno.EPERM):
        os.chmod(p.cpath("wakeup0", "name"), 0o644)
    with raises_errno(errno.EPERM):
        os.chown(p.cpath("wakeup0", "name"), 1, 1)


@pytest.mark.parametrize("name", ["wakeup1", "wakeup01", "wakeup00",
                                  "wakeup", "wakeup-0", "wakeup+0",
                                  "wakeup0x", "wakeup4294967296",
                                  "wakeup99999999999999999999", "foo"])
def test_lookup_of_missing_names(cwfs, name):
    p = cwfs()
    with raises_errno(errno.ENOENT):
        os.stat(p.cpath(name))
    with raises_errno(errno.ENOENT):
        os.stat(p.cpath("wakeup0", name))


def test_file_is_not_a_directory(cwfs):
    p = cwfs()
    with raises_errno(errno.ENOTDIR):
        os.stat(p.cpath("wakeup0", "name", "x"))
    with raises_errno(errno.ENOTDIR):
        os.listdir(p.cpath("wakeup0", "name"))


def test_unmounting_the_class_mount_keeps_the_main_one(cwfs):
    p = cwfs()
    r = subprocess.run([FUSERMOUNT, "-u", p.cw], capture_output=True,
                       timeout=10)
    assert r.returncode == 0, r.stderr
    # The server has seen the end of that session (its main loop logs it),
    # and is still running.
    assert wait_until(lambda: f"{p.cw} was unmounted" in p.log()), p.log()
    assert p.alive()
    p.lock("still")
    assert p.active() == [b"still"]
    p.unlock("still")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_unmounts_both_and_exits_0(sig):
    tmp = tempfile.mkdtemp(prefix="powerfs-test-")
    mnt, cw = os.path.join(tmp, "mnt"), os.path.join(tmp, "cw")
    os.mkdir(mnt)
    os.mkdir(cw)
    proc = subprocess.Popen([POWERFS, "-f", f"--class-wakeup={cw}", mnt],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        assert wait_until(lambda: os.path.ismount(cw) or
                          proc.poll() is not None), "not mounted"
        assert os.path.ismount(mnt) and os.path.ismount(cw)
        proc.send_signal(sig)
        assert proc.wait(10) == 0
        assert not os.path.ismount(mnt) and not os.path.ismount(cw)
        out = proc.stdout.read().decode(errors="replace")
        assert "runtime error" not in out and "Sanitizer" not in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        for d in (cw, mnt):
            subprocess.run([FUSERMOUNT, "-uz", d], capture_output=True)
        if not os.path.ismount(mnt) and not os.path.ismount(cw):
            for d in (cw, mnt):
                os.rmdir(d)
            os.rmdir(tmp)


@pytest.mark.parametrize("case", ["missing", "file", "same", "inside",
                                  "above"])
def test_unusable_class_wakeup_dir(case):
    tmp = tempfile.mkdtemp(prefix="powerfs-test-")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    afile = os.path.join(tmp, "file")
    open(afile, "w").close()
    dirs = {"missing": os.path.join(tmp, "nope"), "file": afile,
            "same": mnt, "inside": os.path.join(mnt, "sub"), "above": tmp}
    if case == "inside":
        os.mkdir(dirs["inside"])
    try:
        r = subprocess.run([POWERFS, "-f", f"--class-wakeup={dirs[case]}",
                            mnt], capture_output=True, timeout=10)
        assert r.returncode == 2, (r.returncode, r.stderr)
        err = r.stderr.decode()
        assert err.startswith("powerfs: ") and err.count("\n") == 1, err
        assert not os.path.ismount(mnt)
    finally:
        subprocess.run([FUSERMOUNT, "-uz", mnt], capture_output=True)
        if case == "inside":
            os.rmdir(dirs["inside"])
        os.unlink(afile)
        os.rmdir(mnt)
        os.rmdir(tmp)


def test_an_open_attribute_never_reads_a_new_source_at_the_old_address(cwfs):
    """A source collected and a new one registered with its id may share
    its address too: glibc's calloc() (GLib's g_new0) skips the per-thread
    cache and hands back the exact-fit chunk that overflowed it.  Ten
    collected sources overflow that cache (7 chunks), and the new sources
    take their ids again; every file kept open on a collected source must
    still read ENODEV, never a new source's data (identity is not the
    address)."""
    p = cwfs("--wakelock-gc-seconds=0")
    p.lock("keep")                       # active: never collected
    olds = [f"old{i}" for i in range(10)]
    p.lock(*olds)                        # wakeup2 .. wakeup11
    fds = []
    try:
        for i, name in enumerate(olds):
            fds.append(os.open(p.cpath(f"wakeup{i + 2}", "name"),
                               os.O_RDONLY))
            assert os.pread(fds[-1], 8192, 0) == name.encode() + b"\n"
        for _ in range(101 - len(olds)):
            p.unlock("old0")
            p.lock("old0")
        p.unlock(*reversed(olds))        # the 101st unlock collects all ten
        assert wait_until(lambda: p.dirs() == ["wakeup0", "wakeup1"])
        for i in range(len(olds)):
            p.lock(f"new{i}")            # the lowest free id: wakeup{i + 2}
            assert p.cread(f"wakeup{i + 2}", "name") == b"new%d\n" % i
            for fd in fds:
                try:
                    got = os.pread(fd, 8192, 0)
                except OSError as e:
                    got = errno.errorcode[e.errno]
                assert got == "ENODEV", (i, got)
    finally:
        for fd in fds:
            os.close(fd)
    p.unlock(*(f"new{i}" for i in range(len(olds))), "keep")


def _fuse_readers(pids):
    """{(pid, tid): blocked-signal mask} of every thread of pids that waits
    in read(2) on /dev/fuse: the serve threads of both mounts, idle."""
    out = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                    if f.read() != "fuse_dev_do_read":
                        continue
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    blk = next(line for line in f
                               if line.startswith("SigBlk:"))
            except FileNotFoundError:
                continue
            out[(pid, tid)] = int(blk.split()[1], 16)
    return out


def test_serve_threads_block_the_signals_the_main_loop_handles(cwfs):
    """SIGTERM, SIGINT and SIGHUP are the main loop's (g_unix_signal_add):
    a serve thread must never take one, so every thread waiting on
    /dev/fuse, for either mount, has them blocked."""
    p = cwfs()
    readers = {}

    def both_mounts_seen():
        # At least one serve thread per mount, each idle in read(2).
        readers.update(_fuse_readers(p.pids()))
        return len(readers) >= 2

    assert wait_until(both_mounts_seen), readers
    for (pid, tid), mask in sorted(readers.items()):
        unblocked = [s.name for s in (signal.SIGTERM, signal.SIGINT,
                                      signal.SIGHUP)
                     if not mask & (1 << (s - 1))]
        assert unblocked == [], (pid, tid, hex(mask))
