"""Every way of reading gives the bytes read(2) gives, as of the moment of
the read, or fails the way its users fall back from: pread and readv at any
offset, sendfile(2) and splice(2) (busybox cat), copy_file_range(2); and
O_DIRECT, mmap as on the kernel.

sendfile and splice do not honour direct_io on Linux 6.5 and later: they
read FUSE files through the page cache, which every opener of a file shares
(one inode per name), and powerfs refuses those reads with EINVAL; busybox
cat then reads(2).  Before 6.5 they come as read(2) does and give its bytes.
Each test tells the two apart by what powerfs -d logged for the read (the
module's mount runs with -d), so the same test holds on both kernels.  These
tests are the ones that failed when the kernel's size was cached for an hour
(output cut short, or empty for wakeup_sources), when a blocked page-cache
read of wakeup_count left its reader in D state, and when page-cache reads
of a shared inode were answered with data (zeros after the content)."""

import errno
import mmap
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import (LogMark, Reader, check_cat_path, freezer_root,
                      raises_errno, read_to_eof, timed, waits_in, wait_until)

BUSYBOX = shutil.which("busybox")

FILES = ["state", "wake_lock", "wake_unlock", "wakeup_count", "autosleep",
         "suspend_stats/success", "suspend_stats/last_failed_step"]

SHARED_ARGS = ("--simulate-sleep-ms=100", "-d")


def call(fn, *args):
    """(data, 0) or (None, errno) of fn(*args)."""
    try:
        return fn(*args), 0
    except OSError as e:
        return None, e.errno


def sendfile_all(path, offset=None, to_file=False):
    """sendfile(2) until it returns 0, into a pipe (or a regular file)."""
    fd = os.open(path, os.O_RDONLY)
    if to_file:
        out = tempfile.TemporaryFile()
        w = out.fileno()
    else:
        r, w = os.pipe()
    data = b""
    try:
        while True:
            n = os.sendfile(w, fd, offset, 1 << 16)
            if n == 0:
                break
            if offset is not None:
                offset += n
            if not to_file:
                data += os.read(r, n)
        if to_file:
            out.seek(0)
            data = out.read()
        return data
    finally:
        os.close(fd)
        if to_file:
            out.close()
        else:
            os.close(r)
            os.close(w)


def splice_all(path, offset=None):
    fd = os.open(path, os.O_RDONLY)
    r, w = os.pipe()
    data = b""
    try:
        while True:
            n = os.splice(fd, w, 1 << 16, offset_src=offset)
            if n == 0:
                return data
            if offset is not None:
                offset += n
            data += os.read(r, n)
    finally:
        for f in (fd, r, w):
            os.close(f)


def busybox_cat(path):
    r = subprocess.run([BUSYBOX, "cat", path], capture_output=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout


def readv_small(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        bufs = [bytearray(3), bytearray(1), bytearray(7), bytearray(8192)]
        n = os.readv(fd, bufs)
        return b"".join(bytes(b) for b in bufs)[:n]
    finally:
        os.close(fd)


@pytest.fixture
def busy(pfs):
    """Content of every length: two locks of different name lengths, a
    handshake failure recorded in suspend_stats, nothing left active (so
    that wakeup_sources holds still)."""
    pfs.lock(b"a-rather-long-lock-name", b"b")
    pfs.unlock(b"b")
    yield pfs
    pfs.unlock(b"a-rather-long-lock-name")


READERS = {
    "sendfile": sendfile_all,
    "sendfile-to-file": lambda p: sendfile_all(p, to_file=True),
    "sendfile-offset": lambda p: sendfile_all(p, offset=0),
    "splice": splice_all,
    "splice-offset": lambda p: splice_all(p, offset=0),
    "readv": readv_small,
}


@pytest.mark.parametrize("how", sorted(READERS))
@pytest.mark.parametrize("name", FILES)
def test_every_reader_gets_the_bytes_of_read(busy, name, how):
    """The bytes of read(2), or (through the page cache) EINVAL."""
    # An active source would change wakeup_sources between two reads, and
    # block wakeup_count.
    still = name in ("wakeup_count", "wakeup_sources")
    if still:
        busy.unlock(b"a-rather-long-lock-name")
    want = read_to_eof(busy.path(name))
    mark = LogMark(busy)
    got, err = call(READERS[how], busy.path(name))
    if how != "readv" and mark.page_cache(name):
        assert (got, err) == (None, errno.EINVAL)
    else:
        assert (got, err) == (want[:8192 + 11] if how == "readv" else want, 0)
    if still:
        busy.lock(b"a-rather-long-lock-name")


SPLICERS = {k: v for k, v in READERS.items() if k != "readv"}


@pytest.mark.parametrize("how", sorted(SPLICERS))
def test_wakeup_sources_cannot_be_spliced(busy, how):
    """A debugfs seq_file: sendfile and splice fail with EINVAL (kernel),
    at any offset; readv reads it like read(2).  Deviation before Linux
    6.5: they come to powerfs as read(2) does, and give its bytes."""
    busy.unlock(b"a-rather-long-lock-name")
    mark = LogMark(busy)
    got, err = call(SPLICERS[how], busy.path("wakeup_sources"))
    if mark.page_cache("wakeup_sources"):
        assert (got, err) == (None, errno.EINVAL)
    else:
        assert (got, err) == (read_to_eof(busy.path("wakeup_sources")), 0)
    want = read_to_eof(busy.path("wakeup_sources"))
    assert readv_small(busy.path("wakeup_sources")) == want
    busy.lock(b"a-rather-long-lock-name")


@pytest.mark.skipif(not BUSYBOX, reason="busybox is not installed")
@pytest.mark.parametrize("name", FILES + ["wakeup_sources"])
def test_busybox_cat_gets_the_bytes_of_read(busy, name):
    """busybox cat tries sendfile(2) first and falls back to read(2) when it
    fails (wakeup_sources as on the kernel; every file through the page
    cache)."""
    still = name in ("wakeup_count", "wakeup_sources")
    if still:
        busy.unlock(b"a-rather-long-lock-name")
    assert busybox_cat(busy.path(name)) == read_to_eof(busy.path(name))
    if still:
        busy.lock(b"a-rather-long-lock-name")


@pytest.mark.skipif(not BUSYBOX, reason="busybox is not installed")
def test_the_reported_cases(pfs):
    """The three wrong outputs the field found: each cat must show what
    GNU cat (read(2)) shows."""
    sh = lambda cmd: subprocess.run(["sh", "-c", cmd], cwd=pfs.path(),
                                    check=True, timeout=10)
    sh("echo mem > state")                 # O_TRUNC: the size went to 0
    assert busybox_cat(pfs.path("state")) == b"freeze mem disk\n"
    sh("echo a-rather-long-lock-name > wake_lock; echo b > wake_lock")
    assert busybox_cat(pfs.path("wake_lock")) == \
        b"a-rather-long-lock-name b\n"
    data = busybox_cat(pfs.path("wakeup_sources"))
    assert data.startswith(b"name\t\tactive_count\t")
    assert b"\na-rather-long-lock-name\t" in data
    pfs.unlock("a-rather-long-lock-name", "b")


def test_no_stale_content_between_page_cache_readers(pfs):
    """A page-cache read that was answered would leave the content in the
    page cache; no later reader may see it, however the content changed."""
    for names in ([b"p1"], [b"p1", b"p2-" + b"x" * 100], [b"p3"], []):
        for n in pfs.active():
            pfs.unlock(n)
        pfs.lock(*names)
        want = read_to_eof(pfs.path("wake_lock"))
        assert want == b" ".join(sorted(names)) + b"\n"
        for how in (sendfile_all, splice_all):
            mark = LogMark(pfs)
            got = call(how, pfs.path("wake_lock"))
            assert got == ((None, errno.EINVAL)
                           if mark.page_cache("wake_lock") else (want, 0))
    for n in pfs.active():
        pfs.unlock(n)


CONTENTS = {b"a\n", b"a " + b"b" * 40 + b"\n"}


def sendfile_or_read(path):
    """What busybox cat does: sendfile(2), read(2) if it fails."""
    fd = os.open(path, os.O_RDONLY)
    r, w = os.pipe()
    try:
        try:
            n = os.sendfile(w, fd, None, 1 << 16)
            return os.read(r, n) if n else b""
        except OSError as e:
            assert e.errno == errno.EINVAL
            return os.read(fd, 1 << 16)
    finally:
        for f in (fd, r, w):
            os.close(f)


def test_concurrent_writers_and_stats_never_corrupt_a_page_cache_read(pfs):
    """One inode per name, shared by every opener: a page-cache read that
    powerfs answered with data while another process wrote the file or
    stat-ed it came out padded with zeros to the size the kernel held (or
    cut at a stale one), in most of 3,000 reads.  Refused, every read gives
    one of the two contents the writer switches between."""
    pfs.lock("a")
    stop = threading.Event()

    def writer():
        fl = os.open(pfs.path("wake_lock"), os.O_WRONLY)
        fu = os.open(pfs.path("wake_unlock"), os.O_WRONLY)
        try:
            while not stop.is_set():
                os.write(fl, b"b" * 40)
                os.write(fu, b"b" * 40)
        finally:
            os.close(fl)
            os.close(fu)

    def statter():
        while not stop.is_set():
            os.stat(pfs.path("wake_lock"))
    threads = [threading.Thread(target=writer), threading.Thread(target=statter)]
    for t in threads:
        t.start()
    try:
        got = [sendfile_or_read(pfs.path("wake_lock")) for _ in range(3000)]
    finally:
        stop.set()
        for t in threads:
            t.join()
        pfs.unlock("a")
    bad = [g for g in got if g not in CONTENTS]
    assert not bad, f"{len(bad)} of {len(got)} reads wrong, e.g. {bad[0][:60]!r}"


@pytest.mark.parametrize("offset", [0, 1, 5, 15, 16, 17, 4096, 1 << 31])
def test_sendfile_at_an_offset_is_a_pread(pfs, offset):
    """Or EINVAL through the page cache: past the size the kernel holds
    for the file (4096), sendfile returns 0 without asking powerfs."""
    want = read_to_eof(pfs.path("state"))
    fd = os.open(pfs.path("state"), os.O_RDONLY)
    r, w = os.pipe()
    try:
        mark = LogMark(pfs)
        n, err = call(os.sendfile, w, fd, offset, 100)
        if mark.page_cache("state"):
            assert (n, err) == (None, errno.EINVAL)
        else:
            got = os.read(r, 100) if n else b""
            assert (n, got) == (len(want[offset:offset + 100]),
                                want[offset:offset + 100])
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0
    finally:
        for f in (fd, r, w):
            os.close(f)


@pytest.mark.skipif(not BUSYBOX, reason="busybox is not installed")
def test_busybox_cat_of_a_long_wakeup_sources(mount):
    p = mount("--wakelock-limit=0")
    names = [b"long-%04d-" % i + b"y" * 100 for i in range(400)]
    for n in names:
        p.lock(n)
        p.unlock(n)
    want = read_to_eof(p.path("wakeup_sources"))
    assert len(want) > 50000
    assert busybox_cat(p.path("wakeup_sources")) == want


@pytest.mark.parametrize("name,whence,off,want", [
    ("state", os.SEEK_DATA, 0, 0), ("state", os.SEEK_DATA, 10, 10),
    ("state", os.SEEK_HOLE, 0, 4096), ("state", os.SEEK_HOLE, 10, 4096),
    ("state", os.SEEK_DATA, 5000, errno.ENXIO),
    ("wakeup_sources", os.SEEK_DATA, 0, errno.EINVAL),
    ("wakeup_sources", os.SEEK_HOLE, 0, errno.EINVAL),
])
def test_seek_data_and_hole(pfs, name, whence, off, want):
    """A sysfs attribute is one page of data (kernel: SEEK_DATA returns the
    offset, SEEK_HOLE 4096); a debugfs seq_file refuses both."""
    fd = os.open(pfs.path(name), os.O_RDONLY)
    try:
        if want in (errno.ENXIO, errno.EINVAL):
            with raises_errno(want):
                os.lseek(fd, off, whence)
        else:
            assert os.lseek(fd, off, whence) == want
    finally:
        os.close(fd)


def test_copy_file_range_out_of_the_mount_is_exdev(pfs):
    fd = os.open(pfs.path("state"), os.O_RDONLY)
    try:
        with tempfile.TemporaryFile() as t, raises_errno(errno.EXDEV):
            os.copy_file_range(fd, t.fileno(), 100)
    finally:
        os.close(fd)


@pytest.mark.parametrize("flags", [os.O_RDONLY, os.O_WRONLY, os.O_RDWR])
@pytest.mark.parametrize("name", ["state", "wake_lock", "wakeup_count",
                                  "suspend_stats/success",
                                  "wakeup_sources"])
def test_o_direct_is_refused(pfs, name, flags):
    """sysfs and debugfs files have no direct I/O: EINVAL at open, once the
    permission checks have passed (EACCES first)."""
    ro = name.startswith("suspend_stats/")
    with raises_errno(errno.EACCES if ro and flags != os.O_RDONLY
                      else errno.EINVAL):
        os.open(pfs.path(name), flags | os.O_DIRECT)


def test_mmap_shared_is_refused(pfs):
    fd = os.open(pfs.path("state"), os.O_RDONLY)
    try:
        with raises_errno(errno.ENODEV):
            mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    finally:
        os.close(fd)


def test_mmap_private_faults_with_sigbus(pfs):
    """Deviation: the kernel refuses every mmap of these files (ENODEV);
    FUSE always allows a private one, whose pages come through the page
    cache, which powerfs refuses: touching the mapping raises SIGBUS."""
    code = ("import mmap, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
            "m = mmap.mmap(fd, 4096, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)\n"
            "print('mapped', flush=True)\n"
            "m[0]\n")
    mark = LogMark(pfs)
    r = subprocess.run([sys.executable, "-c", code, pfs.path("state")],
                       capture_output=True, timeout=10)
    assert (r.returncode, r.stdout) == (-signal.SIGBUS, b"mapped\n")
    assert mark.page_cache("state")


def test_lseek_past_2g_is_accepted(pfs):
    """Deviation (see powerfs(7)): the kernel refuses an offset above 2^31-1
    (sysfs's limit); FUSE's lseek never reaches the server and allows any.
    A read from there returns nothing, as a pread past the end does."""
    fd = os.open(pfs.path("state"), os.O_RDONLY)
    try:
        assert os.lseek(fd, 1 << 31, os.SEEK_SET) == 1 << 31
        assert os.read(fd, 100) == b""
        assert os.lseek(fd, 0, os.SEEK_SET) == 0
        assert os.read(fd, 100) == b"freeze mem disk\n"
    finally:
        os.close(fd)


# --- a blocked wakeup_count through the page cache ---------------------------

def proc_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def never_in_d_state(pid, secs=0.3):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        st = proc_state(pid)
        if st == "D":
            return False
        time.sleep(0.005)
    return True


@pytest.mark.parametrize("call", ["sendfile", "splice"])
def test_blocked_page_cache_reader_blocks_like_read(pfs, call):
    """Before Linux 6.5, sendfile and splice come as read(2) does and wait
    the same way.  Through the page cache they fail at once with EINVAL
    (busybox cat reads(2) then, below): nothing waits with a page locked."""
    n = pfs.count()
    pfs.lock("held")
    mark = LogMark(pfs)
    with Reader(pfs.path("wakeup_count"), call=call) as rd:
        rd.wait_in_read()
        blocked = rd.blocked(0.3)
        if mark.page_cache("wakeup_count", rd.proc.pid):
            pfs.unlock("held")
            assert (blocked, rd.result()) == (False, (-1, errno.EINVAL, b""))
            return
        assert blocked
        assert never_in_d_state(rd.proc.pid)
        # Other openers and readers go on.
        assert timed(read_to_eof, pfs.path("state")) == b"freeze mem disk\n"
        fd = timed(os.open, pfs.path("wakeup_count"), os.O_RDONLY)
        os.close(fd)
        pfs.unlock("held")
        assert rd.result() == (len(b"%d\n" % (n + 1)), 0, b"%d\n" % (n + 1))


@pytest.mark.parametrize("call", ["sendfile", "splice", "cat"])
@pytest.mark.parametrize("mode", ["handler", "restart"])
def test_blocked_page_cache_reader_gets_eintr(pfs, call, mode):
    """As read(2) does: a signal with a handler ends the wait with EINTR,
    SA_RESTART or not.  Through the page cache, sendfile and splice fail
    at once with EINVAL; the reader that then reads(2), as busybox cat
    does, gets EINTR."""
    pfs.lock("held")
    mark = LogMark(pfs)
    try:
        with Reader(pfs.path("wakeup_count"), mode=mode, call=call) as rd:
            rd.wait_in_read()
            if call != "cat" and \
                    mark.page_cache("wakeup_count", rd.proc.pid):
                assert rd.result() == (-1, errno.EINVAL, b"")
                return
            assert rd.blocked(0.1)
            if call == "cat":
                check_cat_path(mark, rd.proc.pid)
            rd.proc.send_signal(signal.SIGUSR1)
            assert rd.result() == (-1, errno.EINTR, b"")
    finally:
        pfs.unlock("held")


@pytest.mark.parametrize("call", ["sendfile", "splice", "cat"])
def test_blocked_page_cache_reader_dies_at_sigkill(pfs, call):
    pfs.lock("held")
    mark = LogMark(pfs)
    try:
        with Reader(pfs.path("wakeup_count"), call=call) as rd:
            rd.wait_in_read()
            if call != "cat" and \
                    mark.page_cache("wakeup_count", rd.proc.pid):
                assert rd.result() == (-1, errno.EINVAL, b"")
                return
            assert rd.blocked(0.1)
            rd.proc.kill()
            rd.proc.wait(2)
    finally:
        pfs.unlock("held")
    assert pfs.count() >= 0


def busybox_reader(path):
    return subprocess.Popen([BUSYBOX, "cat", path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def in_a_read(pid):
    return waits_in(pid) in ("0", "40", "63", "71")


def freeze_v1(cg, pid):
    with open(os.path.join(cg, "cgroup.procs"), "w") as f:
        f.write(str(pid))
    with open(os.path.join(cg, "freezer.state"), "w") as f:
        f.write("FROZEN")


def frozen_v1(cg):
    with open(os.path.join(cg, "freezer.state")) as f:
        return f.read().strip() == "FROZEN"


def thaw_v1(cg):
    with open(os.path.join(cg, "freezer.state"), "w") as f:
        f.write("THAWED")


def freeze_v2(cg, pid):
    with open(os.path.join(cg, "cgroup.procs"), "w") as f:
        f.write(str(pid))
    with open(os.path.join(cg, "cgroup.freeze"), "w") as f:
        f.write("1")


def frozen_v2(cg):
    with open(os.path.join(cg, "cgroup.events")) as f:
        return "frozen 1" in f.read()


def thaw_v2(cg):
    with open(os.path.join(cg, "cgroup.freeze"), "w") as f:
        f.write("0")


def remove_cgroup(cg):
    """rmdir once the frozen-then-killed task has left (EBUSY until then)."""
    deadline = time.monotonic() + 2
    while True:
        try:
            os.rmdir(cg)
            return
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


FREEZERS = {
    "v1": (freeze_v1, frozen_v1, thaw_v1),
    "v2": (freeze_v2, frozen_v2, thaw_v2),
}


@pytest.mark.skipif(not BUSYBOX, reason="busybox is not installed")
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_freezer_freezes_a_busybox_cat_of_wakeup_count(pfs, version):
    """busybox cat reads with sendfile(2): blocked in wakeup_count, it must
    freeze within 1 s, never sit in D state, and print the count after the
    thaw and the unlock."""
    freeze, frozen, thaw = FREEZERS[version]
    with freezer_root(version) as root:
        freeze_a_busybox_cat(pfs, version, root, freeze, frozen, thaw)


def freeze_a_busybox_cat(pfs, version, root, freeze, frozen, thaw):
    n = pfs.count()
    pfs.lock("held")
    cg = os.path.join(root, f"powerfs-test-{os.getpid()}-{version}")
    os.mkdir(cg)
    mark = LogMark(pfs)
    proc = busybox_reader(pfs.path("wakeup_count"))
    try:
        assert wait_until(lambda: in_a_read(proc.pid), timeout=5)
        assert never_in_d_state(proc.pid, 0.2)
        check_cat_path(mark, proc.pid)
        t0 = time.monotonic()
        freeze(cg, proc.pid)
        assert wait_until(lambda: frozen(cg), timeout=1.0), \
            f"not frozen after {time.monotonic() - t0:.2f} s, reader " \
            f"state {proc_state(proc.pid)}"
        thaw(cg)
        assert never_in_d_state(proc.pid, 0.2)
        assert proc.poll() is None, "the reader gave up with the lock held"
        pfs.unlock("held")
        out, err = proc.communicate(timeout=5)
        assert (proc.returncode, out) == (0, b"%d\n" % (n + 1)), err
    finally:
        pfs.unlock("held")
        if proc.poll() is None:
            thaw(cg)
            proc.kill()
            proc.wait(5)
        remove_cgroup(cg)


@pytest.mark.skipif(not BUSYBOX, reason="busybox is not installed")
def test_other_openers_are_not_held_up_by_a_page_cache_reader(pfs):
    pfs.lock("held")
    mark = LogMark(pfs)
    proc = busybox_reader(pfs.path("wakeup_count"))
    try:
        assert wait_until(lambda: in_a_read(proc.pid), timeout=5)
        assert never_in_d_state(proc.pid, 0.2)
        check_cat_path(mark, proc.pid)
        for _ in range(5):
            fd = timed(os.open, pfs.path("wakeup_count"), os.O_RDONLY,
                       timeout=2)
            os.close(fd)
            assert timed(os.stat, pfs.path("wakeup_count"),
                         timeout=2).st_size == 4096
        pfs.unlock("held")
        out, _ = proc.communicate(timeout=5)
        assert out == read_to_eof(pfs.path("wakeup_count"))
    finally:
        pfs.unlock("held")
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


@pytest.mark.parametrize("second", ["cat", "read"])
def test_two_blocked_readers_of_one_inode_wait_apart(pfs, second):
    """The page cache is per inode, and a page-cache read waiting in powerfs
    would hold its page locked: a second page-cache reader of the inode
    (every opener's, now) would wait for that lock in D state, deaf to
    signals and the freezer.  No page-cache read waits: the first reader,
    as busybox cat, waits in read(2) or (before Linux 6.5) in a sendfile
    that came as read(2); the second waits in S and takes a signal, and the
    first gets the count."""
    n = pfs.count()
    pfs.lock("held")
    mark = LogMark(pfs)
    try:
        with Reader(pfs.path("wakeup_count"), call="cat") as first, \
                Reader(pfs.path("wakeup_count"), mode="handler",
                       call=second) as other:
            first.wait_in_read()
            other.wait_in_read()
            assert never_in_d_state(other.proc.pid)
            assert never_in_d_state(first.proc.pid)
            assert first.blocked(0.05) and other.blocked(0.05)
            check_cat_path(mark, first.proc.pid)
            if second == "cat":
                check_cat_path(mark, other.proc.pid)
            other.proc.send_signal(signal.SIGUSR1)
            assert other.result() == (-1, errno.EINTR, b"")
            # A third reader's path walk changes nothing for the first.
            assert timed(os.stat, pfs.path("wakeup_count")).st_size == 4096
            pfs.unlock("held")
            want = b"%d\n" % (n + 1)
            assert first.result() == (len(want), 0, want)
    finally:
        pfs.unlock("held")


@pytest.mark.skipif(not BUSYBOX, reason="busybox is not installed")
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_freezer_freezes_the_second_busybox_cat(pfs, version):
    """Two busybox cat readers of wakeup_count blocked at once (one per
    container, say): freezing the second's cgroup takes under 1 s."""
    freeze, frozen, thaw = FREEZERS[version]
    with freezer_root(version) as root:
        freeze_the_second(pfs, version, root, freeze, frozen, thaw)


def freeze_the_second(pfs, version, root, freeze, frozen, thaw):
    n = pfs.count()
    pfs.lock("held")
    cg = os.path.join(root, f"powerfs-test-{os.getpid()}-second-{version}")
    os.mkdir(cg)
    mark = LogMark(pfs)
    procs = [busybox_reader(pfs.path("wakeup_count")) for _ in range(2)]
    try:
        for p in procs:
            assert wait_until(lambda: in_a_read(p.pid), timeout=5)
            assert never_in_d_state(p.pid, 0.2)
            check_cat_path(mark, p.pid)
        freeze(cg, procs[1].pid)
        assert wait_until(lambda: frozen(cg), timeout=1.0), \
            f"reader state {proc_state(procs[1].pid)}"
        thaw(cg)
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
        remove_cgroup(cg)
