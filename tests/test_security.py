"""Security review (SECURITY.md): one test per claim.

Each test is named in SECURITY.md next to the claim it checks, and fails if
that claim stops being true.  Some tests pin down a documented risk (what a
writer CAN do that a reader of the kernel's interface might not expect); they
say so in their docstring, and must be updated together with SECURITY.md when
the behaviour is hardened.
"""

import ctypes
import errno
import os
import random
import re
import signal
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

import conftest
from conftest import (CAP_BLOCK_SUSPEND, PYTHON, Background, ChildSetupError,
                      Reader, effective_caps, open_close, open_read_close,
                      open_write_close, raises_errno, run_in_child,
                      unshare_as_root, wait_until)

CAP_CHOWN = 0
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2
CAP_FOWNER = 3

USER = dict(uid=1000, gid=1000, groups=[])
OTHER = dict(uid=2000, gid=2000, groups=[])
NOBODY = dict(uid=65534, gid=65534, groups=[])
# A container's root as the host sees it: an unprivileged kernel uid.
CONTAINER_ROOT = dict(uid=100000, gid=100000, groups=[])
# The ids that root maps into a container it starts (LXC's lxc.idmap).
CT_MAP = "0 100000 65536"

RW_FILES = ("state", "wakeup_count", "autosleep", "wake_lock", "wake_unlock")
RO_FILES = tuple("suspend_stats/" + n for n in conftest.STATS_FILES)
MiB = 1024 * 1024


# --- helpers -----------------------------------------------------------------

def write_as(p, name, data, **who):
    return run_in_child(open_write_close, p.path(name), data, **who)


def in_userns(fn, *args, **kw):
    """run_in_child(fn, *args, **kw) for a child that makes a user
    namespace (new_userns, parent_map, or fn is unshare_as_root); skips if
    the kernel refuses namespaces."""
    try:
        return run_in_child(fn, *args, **kw)
    except ChildSetupError as e:
        pytest.skip(f"cannot create a user namespace: {e}")


def ct_root(fn, *args):
    """fn(*args) as the root of a container that root started (LXC): root
    made the user namespace and wrote its map (host ids 100000..165535), so
    fn runs as uid 0 there, host uid 100000, with every capability there."""
    return in_userns(fn, *args, parent_map=CT_MAP)


def as_uid(uid, fn, *args):
    """For run_in_child: become uid (and gid uid, no groups), then fn."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    return fn(*args)


def write_holding_cap(path, data):
    """open_write_close, by a writer that holds CAP_BLOCK_SUSPEND in its own
    namespace (so that an EPERM is powerfs's judgement of the namespace)."""
    assert effective_caps() & (1 << CAP_BLOCK_SUSPEND), "no capability"
    return open_write_close(path, data)


def mode_owner(path):
    st = os.stat(path)
    return stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def measurable(p):
    """False if the server runs under AddressSanitizer: its quarantine keeps
    freed memory, so RSS says nothing there (LeakSanitizer, which the
    fixture's log scan reports, covers leaks in that build instead)."""
    with open(f"/proc/{p.proc.pid}/maps") as f:
        return "libasan" not in f.read()


def user_sources(p):
    """Names of the wake locks (active and inactive)."""
    return p.active() + p.inactive()


def mount_entry(mnt):
    """(mount options, fs type, source, super options) from mountinfo."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ")
            fields = left.split()
            if fields[4] == mnt:
                fstype, source, sopts = right.split()
                return set(fields[5].split(",")), fstype, source, \
                    set(sopts.split(","))
    raise AssertionError(f"{mnt} not in mountinfo")


def finish(inst):
    """Unmount now (exit status and log checked); the fixture then has
    nothing left to do for it."""
    inst.stop()
    inst.stop = lambda: None


# One write(2) through libc: an EINTR is reported, not retried.
_WRITER = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
libc.write.restype = ctypes.c_ssize_t
fd = os.open(sys.argv[1], os.O_WRONLY)
sys.stdout.write("ready\n"); sys.stdout.flush()
data = sys.argv[2].encode()
n = libc.write(fd, data, len(data))
sys.stdout.write("ok %d\n" % n if n >= 0 else "err %d\n" % ctypes.get_errno())
sys.stdout.flush()
'''


def start_writer(path, data):
    """A child process doing one write(2) of data to path."""
    proc = subprocess.Popen([PYTHON, "-c", _WRITER, path, data],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    conftest._children.append(proc)
    assert proc.stdout.readline() == b"ready\n"
    return proc


# === Defaults ================================================================

def test_default_mount_options(mount):
    """default_permissions always; allow_other only when asked; nosuid,
    nodev; the source and type name powerfs."""
    p = mount()
    mopts, fstype, source, sopts = mount_entry(p.mnt)
    assert {"nosuid", "nodev"} <= mopts
    assert (fstype, source) == ("fuse.powerfs", "powerfs")
    assert "default_permissions" in sopts
    assert "allow_other" not in sopts
    for d in (p.path(), p.path("suspend_stats")):
        assert mode_owner(d) == (0o755, 0, 0)
    q = mount("-o", "allow_other")
    _, _, _, sopts = mount_entry(q.mnt)
    assert {"default_permissions", "allow_other"} <= sopts


def test_without_allow_other_other_uids_get_eacces(mount):
    p = mount()
    for who in (USER, CONTAINER_ROOT):
        for path in (p.path(), p.path("state"), p.path("wakeup_sources")):
            with raises_errno(errno.EACCES):
                run_in_child(os.stat, path, **who)
        with raises_errno(errno.EACCES):
            run_in_child(os.listdir, p.path(), **who)
        with raises_errno(errno.EACCES):
            run_in_child(open_read_close, p.path("wake_lock"), **who)
    # The mounting user (root) is served.
    assert p.read("state") == b"freeze mem disk\n"


def test_allow_other_default_modes_refuse_writes(mount):
    p = mount("-o", "allow_other")
    for name in RW_FILES:
        assert mode_owner(p.path(name)) == (0o644, 0, 0)
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC):
            with raises_errno(errno.EACCES):
                run_in_child(open_close, p.path(name), flags, **USER)
        # Reading is allowed (0644).
        run_in_child(open_read_close, p.path(name), **USER)
    assert p.read("wake_lock") == b"\n"
    assert p.read("suspend_stats/success") == b"0\n"


def test_chmod_0666_still_needs_cap_for_wake_lock(mount):
    p = mount("-o", "allow_other")
    for name in ("wake_lock", "wake_unlock"):
        os.chmod(p.path(name), 0o666)
        for data in (b"usr", b"usr 1000", b"\n"):
            with raises_errno(errno.EPERM):
                write_as(p, name, data, **USER)
    assert p.read("wake_lock") == b"\n"
    assert p.read("wake_unlock") == b"\n"


def test_chmod_0666_gives_state_autosleep_wakeup_count_away(mount):
    """No capability guards these three files: write access is all it
    takes, so granting it is the admin's decision (state = suspend)."""
    p = mount("-o", "allow_other", "--simulate-sleep-ms=10")
    for name in ("state", "autosleep", "wakeup_count"):
        os.chmod(p.path(name), 0o666)
    n = p.count()
    assert write_as(p, "wakeup_count", b"%d" % n, **USER) == len(str(n))
    assert write_as(p, "state", b"mem", **USER) == 3
    assert p.read("suspend_stats/success") == b"1\n"
    assert write_as(p, "autosleep", b"off", **USER) == 3
    assert p.count() == n + 1


def test_shipped_configurations_ask_for_allow_other():
    """The systemd unit and scripts/powerfs-container both mount with
    allow_other: there the modes are the only boundary."""
    unit = (conftest.REPO / "dist" / "powerfs.service.in").read_text()
    assert re.search(r"^ExecStart=.*-o allow_other", unit, re.M)
    script = (conftest.REPO / "scripts" / "powerfs-container").read_text()
    assert re.search(r'^"\$powerfs" -o allow_other', script, re.M)


# === Ownership, modes, the fixed tree ========================================

def test_only_cap_chown_changes_the_owner(mount):
    p = mount("-o", "allow_other")
    path = p.path("wake_lock")
    with raises_errno(errno.EPERM):
        run_in_child(os.chown, path, 1000, 1000, **USER)
    with raises_errno(errno.EPERM):                 # root without CAP_CHOWN
        run_in_child(os.chown, path, 1000, 1000, drop_caps=[CAP_CHOWN])
    assert mode_owner(path) == (0o644, 0, 0)
    os.chown(path, 1000, 1000)
    assert mode_owner(path) == (0o644, 1000, 1000)
    # Not even the owner may give the file away...
    with raises_errno(errno.EPERM):
        run_in_child(os.chown, path, 2000, -1, uid=1000, gid=1000,
                     groups=[1001])
    # ... nor move it to a group it is not in; one of its own groups is the
    # standard Unix rule.
    with raises_errno(errno.EPERM):
        run_in_child(os.chown, path, -1, 2002, uid=1000, gid=1000,
                     groups=[1001])
    run_in_child(os.chown, path, -1, 1001, uid=1000, gid=1000, groups=[1001])
    assert mode_owner(path) == (0o644, 1000, 1001)


def test_owner_can_chmod_others_cannot(mount):
    p = mount("-o", "allow_other")
    path = p.path("wake_lock")
    with raises_errno(errno.EPERM):
        run_in_child(os.chmod, path, 0o666, **USER)
    os.chown(path, 1000, 1000)
    with raises_errno(errno.EPERM):
        run_in_child(os.chmod, path, 0o666, **OTHER)
    with raises_errno(errno.EPERM):                 # root without CAP_FOWNER
        run_in_child(os.chmod, path, 0o600, drop_caps=[CAP_FOWNER])
    run_in_child(os.chmod, path, 0o666, **USER)
    assert mode_owner(path) == (0o666, 1000, 1000)
    # What the owner opened up, others may now use (write access; the
    # capability check still applies to wake_lock).
    run_in_child(open_close, path, os.O_WRONLY, **OTHER)


def test_root_is_bound_by_modes_only_through_capabilities(mount):
    """The kernel checks the modes (default_permissions): root passes with
    CAP_DAC_OVERRIDE, and fails like anyone else without it."""
    p = mount()
    os.chmod(p.path("wake_lock"), 0)
    assert p.write("wake_lock", b"r0") == 2
    p.unlock("r0")
    with raises_errno(errno.EACCES):
        write_as(p, "wake_lock", b"r1",
                 drop_caps=[CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH])
    assert p.read("wake_lock") == b"\n"


def test_files_cannot_be_created_removed_or_renamed(mount):
    p = mount("-o", "allow_other")
    before = sorted(os.listdir(p.path()))
    m = p.path
    with raises_errno(errno.EACCES):
        os.open(m("new"), os.O_CREAT | os.O_WRONLY, 0o644)
    with raises_errno(errno.EACCES):
        os.mknod(m("node"), 0o644 | stat.S_IFREG)
    for call in (lambda: os.mkdir(m("dir")),
                 lambda: os.unlink(m("state")),
                 lambda: os.unlink(m("suspend_stats/success")),
                 lambda: os.rmdir(m("suspend_stats")),
                 lambda: os.rename(m("state"), m("x")),
                 lambda: os.rename(m("state"), m("wake_lock")),
                 lambda: os.rename(m("suspend_stats/fail"), m("fail")),
                 lambda: os.symlink("state", m("sl")),
                 lambda: os.link(m("state"), m("hl"))):
        with raises_errno(errno.EPERM):
            call()
    # Even with the directory opened to everyone, the server refuses.
    os.chmod(p.path(), 0o777)
    with raises_errno(errno.EACCES):
        run_in_child(os.open, m("new"), os.O_CREAT | os.O_WRONLY, 0o644,
                     **USER)
    with raises_errno(errno.EPERM):
        run_in_child(os.unlink, m("state"), **USER)
    # No extended attributes either.
    with raises_errno(errno.EOPNOTSUPP):
        os.setxattr(m("wake_lock"), "user.x", b"1")
    assert sorted(os.listdir(p.path())) == before


@pytest.mark.parametrize("name", RO_FILES)
def test_read_only_files_never_open_for_writing(mount, name):
    p = mount("-o", "allow_other")
    assert mode_owner(p.path(name)) == (0o444, 0, 0)
    for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND):
        with raises_errno(errno.EACCES):
            os.open(p.path(name), flags)
    os.chmod(p.path(name), 0o666)
    with raises_errno(errno.EACCES):
        os.open(p.path(name), os.O_WRONLY)
    with raises_errno(errno.EACCES):
        run_in_child(open_close, p.path(name), os.O_WRONLY, **USER)
    # Root may truncate it: accepted and ignored.
    before = p.read(name)
    os.truncate(p.path(name), 0)
    assert p.read(name) == before


def test_lock_names_are_visible_to_every_reader(mount):
    """Information disclosure: wake_lock, wake_unlock (0644) and
    wakeup_sources (0444) show every lock name to whoever may look."""
    p = mount("-o", "allow_other")
    p.lock("secret-held")
    p.lock("secret-idle")
    p.unlock("secret-idle")
    assert run_in_child(open_read_close, p.path("wake_lock"), **USER) \
        == b"secret-held\n"
    assert run_in_child(open_read_close, p.path("wake_unlock"), **USER) \
        == b"secret-idle\n"
    sources = run_in_child(open_read_close, p.path("wakeup_sources"), **USER)
    assert b"\nsecret-held " in sources and b"\nsecret-idle " in sources
    # The admin can hide them: chmod persists and is enforced.
    for name in ("wake_lock", "wake_unlock"):
        os.chmod(p.path(name), 0o600)
    os.chmod(p.path("wakeup_sources"), 0o400)
    for name in ("wake_lock", "wake_unlock", "wakeup_sources"):
        with raises_errno(errno.EACCES):
            run_in_child(open_read_close, p.path(name), **USER)
    p.unlock("secret-held")


def test_class_wakeup_is_read_only_and_world_readable(mount):
    # Other users must reach the mount point: not under pytest's 0700 tmp.
    cw = Path(tempfile.mkdtemp(prefix="powerfs-cw-"))
    os.chmod(cw, 0o755)
    p = mount("-o", "allow_other", f"--class-wakeup={cw}")
    p.lock("cwsecret")
    d = [e for e in os.listdir(cw)
         if (cw / e / "name").read_bytes() == b"cwsecret\n"]
    assert len(d) == 1
    name = str(cw / d[0] / "name")
    assert run_in_child(open_read_close, name, **USER) == b"cwsecret\n"
    _, _, _, sopts = mount_entry(str(cw))
    assert "default_permissions" in sopts
    with raises_errno(errno.EACCES):
        os.open(name, os.O_WRONLY)
    with raises_errno(errno.EPERM):
        os.chmod(name, 0o400)
    with raises_errno(errno.EPERM):
        os.chown(name, 1000, 1000)
    p.unlock("cwsecret")
    finish(p)
    os.rmdir(cw)


# === Memory bounds ===========================================================

def test_lock_limit_caps_distinct_names(mount):
    p = mount()
    ok = nospc = 0
    fd = os.open(p.path("wake_lock"), os.O_WRONLY)
    try:
        for i in range(5000):
            try:
                os.write(fd, b"n%d" % i)
                ok += 1
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                nospc += 1
        # Re-locking an existing name still works at the limit.
        os.write(fd, b"n0")
    finally:
        os.close(fd)
    assert (ok, nospc) == (100, 4900)
    assert len(p.active()) == 100
    assert len(p.sources()) == 100 + 2          # + autosleep, deleted
    p.unlock(*(b"n%d" % i for i in range(100)))
    assert len(user_sources(p)) == 100


def test_unlimited_locks_with_limit_zero(mount):
    """--wakelock-limit=0: no cap; memory is bounded only by what the
    writers may do (documented risk)."""
    p = mount("--wakelock-limit=0")
    fd = os.open(p.path("wake_lock"), os.O_WRONLY)
    try:
        for i in range(1000):
            os.write(fd, b"u%d" % i)
    finally:
        os.close(fd)
    # (the wake_lock listing stops at 4095 bytes; wakeup_sources does not)
    assert len(p.sources()) == 1000 + 2
    p.unlock(*(b"u%d" % i for i in range(1000)))
    assert p.read("wake_lock") == b"\n"


def test_write_is_cut_to_4096_bytes(mount):
    p = mount()
    fd = os.open(p.path("wake_lock"), os.O_WRONLY)
    try:
        assert os.write(fd, b"w" * MiB) == 4096
    finally:
        os.close(fd)
    names = [n for n in p.sources() if n.startswith(b"w")]
    assert [len(n) for n in names] == [4096]
    # wake_unlock takes the whole (cut) line as the name: a 1 MiB unlock
    # finds the 4096-byte lock, so only the first 4096 bytes counted.
    fd = os.open(p.path("wake_unlock"), os.O_WRONLY)
    try:
        assert os.write(fd, b"w" * MiB) == 4096
    finally:
        os.close(fd)
    assert p.read("wake_lock") == b"\n"
    # A longer name cannot exist: 4097 bytes are cut to 4096.
    assert p.write("wake_lock", b"v" * 4097) == 4096
    assert [len(n) for n in p.sources() if n.startswith(b"v")] == [4096]
    p.unlock(b"v" * 4096)


def test_gc_frees_idle_sources_never_held_ones(mount):
    p = mount("--wakelock-gc-seconds=0")
    p.lock("held")
    for i in range(99):
        p.lock(b"g%d" % i)
        p.unlock(b"g%d" % i)
    with raises_errno(errno.ENOSPC):             # held + 99 idle = 100
        p.write("wake_lock", b"g99")
    p.unlock(b"g0")                              # 100th unlock: not yet
    assert len(user_sources(p)) == 100
    # The 101st unlock since the last collection collects the idle
    # sources; an active one is never collected.
    p.unlock(b"g1")
    assert (p.active(), p.inactive()) == ([b"held"], [])
    assert p.source("deleted").active_count == 99
    p.lock(b"g99")
    p.unlock(b"g99", b"held")


def test_rss_bounded_after_10000_random_cycles(mount):
    p = mount()
    rng = random.Random(1)
    lk = os.open(p.path("wake_lock"), os.O_WRONLY)
    ul = os.open(p.path("wake_unlock"), os.O_WRONLY)
    try:
        for _ in range(10000):
            name = rng.randbytes(rng.randint(1, 4096)).translate(
                None, b" \t\n\v\f\r\x00\xa0") or b"x"
            for fd, expected in ((lk, errno.ENOSPC), (ul, errno.EINVAL)):
                try:
                    os.write(fd, name)
                except OSError as e:
                    assert e.errno == expected, e
    finally:
        os.close(lk)
        os.close(ul)
    assert len(p.sources()) == 100 + 2
    assert p.read("wake_lock") == b"\n"
    if measurable(p):
        assert rss_kib(p.proc.pid) < 64 * 1024


def test_gc_churn_does_not_leak(mount):
    """~10,000 sources with names of up to 4096 bytes created and
    collected: the server's memory stays flat."""
    p = mount("--wakelock-gc-seconds=0")
    rng = random.Random(2)
    lk = os.open(p.path("wake_lock"), os.O_WRONLY)
    ul = os.open(p.path("wake_unlock"), os.O_WRONLY)
    last = None
    try:
        for i in range(10000):
            if i == 1000:
                warm = rss_kib(p.proc.pid)
            name = b"%d-" % i + bytes(rng.choice(b"abcdefgh")
                                      for _ in range(8)) * 500
            try:
                os.write(lk, name)
            except OSError as e:
                assert e.errno == errno.ENOSPC
                os.write(ul, last)          # the 101st unlock collects
                continue
            os.write(ul, name)
            last = name
    finally:
        os.close(lk)
        os.close(ul)
    assert p.source("deleted").active_count > 9000
    end = rss_kib(p.proc.pid)
    if measurable(p):
        assert end < 64 * 1024
        assert end - warm < 8 * 1024, (warm, end)


def test_snapshot_per_open_is_at_most_the_content(mount):
    """wakeup_sources has no 4096-byte cap (debugfs): with 100 names of
    4096 bytes it is ~400 KiB.  It is printed a row at a time, as seq_file
    prints it: an open fd that has read keeps at most one row until it is
    closed (documented risk: readers pin a little memory each)."""
    p = mount("-o", "allow_other")
    if not measurable(p):
        pytest.skip("RSS is meaningless under AddressSanitizer")
    names = [b"%03d" % i + b"s" * 4093 for i in range(100)]
    p.lock(*names)
    size = len(p.read_all("wakeup_sources"))
    assert 400_000 < size < 430_000
    base = rss_kib(p.proc.pid)
    n = 64

    def hold_readers():
        fds = [os.open(p.path("wakeup_sources"), os.O_RDONLY)
               for _ in range(n)]
        for fd in fds:
            assert os.read(fd, 1) == b"n"
        grown = rss_kib(p.proc.pid)
        for fd in fds:
            os.close(fd)
        return grown

    peaks = [run_in_child(hold_readers, **USER) for _ in range(4)]
    # Each reader costs at most one row (a 4096-byte name and its numbers,
    # rounded up to a power of two by GString) and its record: 16 KiB, plus
    # slack for the allocator.  A copy of the listing per reader would be
    # 64 x 413 KB.
    bound = base + n * 16 + 4 * 1024
    assert max(peaks) < bound, (base, peaks, bound)
    # Closing frees them: repeated rounds do not accumulate.
    assert peaks[-1] < peaks[0] + 8 * 1024, peaks
    p.unlock(*names)


def test_many_unread_fds_cost_little(mount):
    p = mount("-o", "allow_other")
    p.lock("hold")
    base = rss_kib(p.proc.pid)
    fds = []
    try:
        for i in range(1000):
            fds.append(os.open(p.path(RW_FILES[i % len(RW_FILES)]),
                               os.O_RDONLY))
        # The server still answers, others included.
        assert run_in_child(open_read_close, p.path("state"), **USER,
                            timeout=5) == b"freeze mem disk\n"
        assert p.read("wake_lock") == b"hold\n"
        if measurable(p):
            assert rss_kib(p.proc.pid) - base < 4 * 1024
    finally:
        for fd in fds:
            os.close(fd)
    p.unlock("hold")


# K reads of wakeup_count submitted with io_submit (no O_DIRECT: powerfs
# refuses it), each from a thread of its own so that a read the kernel runs
# synchronously holds up no other.  Prints "ready" once every thread is in
# io_submit or back from it, then, when the reads completed, one line per
# read: its result (bytes, or -errno).
_PARKER = r"""
import ctypes, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
class Iocb(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("key", ctypes.c_uint32),
                ("rw_flags", ctypes.c_int32), ("opcode", ctypes.c_uint16),
                ("prio", ctypes.c_int16), ("fd", ctypes.c_uint32),
                ("buf", ctypes.c_uint64), ("nbytes", ctypes.c_uint64),
                ("offset", ctypes.c_int64), ("r2", ctypes.c_uint64),
                ("flags", ctypes.c_uint32), ("resfd", ctypes.c_uint32)]
class Event(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("obj", ctypes.c_uint64),
                ("res", ctypes.c_int64), ("res2", ctypes.c_int64)]
path, k = sys.argv[1], int(sys.argv[2])
ctx = ctypes.c_ulong(0)
assert libc.syscall(206, k, ctypes.byref(ctx)) == 0
fd = os.open(path, os.O_RDONLY)
bufs = [ctypes.create_string_buffer(4096) for _ in range(k)]
cbs = [Iocb(data=i, opcode=0, fd=fd, buf=ctypes.addressof(bufs[i]),
            nbytes=4096) for i in range(k)]
def submit(i):
    p = (ctypes.POINTER(Iocb) * 1)(ctypes.pointer(cbs[i]))
    if libc.syscall(209, ctx, 1, p) != 1:
        print("io_submit", i, os.strerror(ctypes.get_errno()), flush=True)
threading.stack_size(256 * 1024)
ts = [threading.Thread(target=submit, args=(i,)) for i in range(k)]
for t in ts:
    t.start()
print("ready", flush=True)
for t in ts:
    t.join()
evs = (Event * k)()
n = libc.syscall(208, ctx, k, k, evs, None)
for i in range(n):
    print(evs[i].res, bufs[evs[i].data].value.decode(), end="", flush=True)
"""


# About 10 s on an idle machine; the watchdog is for hangs.
@pytest.mark.timeout(180)
@pytest.mark.parametrize("k", [16, 100])
def test_parked_async_reads_do_not_hold_back_release(mount, k):
    """Asynchronous reads that wait inside powerfs cannot fill FUSE's
    background slots (12): if they did, the kernel would hold back every
    RELEASE and each open/read/close of wakeup_sources would stay allocated
    in powerfs (issue 10: 6 -> 68 MB over 100k cycles).  With the reads
    parked, 10,000 cycles leave the server's memory where it was (before
    eb50ca0 they added 12 MiB per 20,000), and the reads get the count when
    the lock goes."""
    p = mount("-o", "allow_other")
    if not measurable(p):
        pytest.skip("RSS is meaningless under AddressSanitizer")
    p.lock("hold")
    parker = subprocess.Popen(
        [PYTHON, "-c", _PARKER, p.path("wakeup_count"), str(k)],
        stdout=subprocess.PIPE, text=True, user=1000, group=1000,
        extra_groups=[])
    try:
        assert parker.stdout.readline() == "ready\n"

        def all_submitted():
            # Each submitting thread waits in io_submit (a synchronous read)
            # or has returned from it (a read the kernel queued).
            n = 0
            for tid in os.listdir(f"/proc/{parker.pid}/task"):
                try:
                    with open(f"/proc/{parker.pid}/task/{tid}/syscall") as f:
                        n += f.read().split(" ", 1)[0] == "209"
                except OSError:
                    pass
            return n == k
        # Not asserted: on a kernel that queues them, io_submit returns.
        wait_until(all_submitted, timeout=10)
        path = p.path("wakeup_sources")
        for _ in range(1000):                       # warm the allocator
            open_read_close(path)
        base = rss_kib(p.proc.pid)
        for _ in range(10000):
            open_read_close(path)
        grown = rss_kib(p.proc.pid) - base
        assert grown < 2 * 1024, f"RSS grew by {grown} KiB"
        p.unlock("hold")
        out, _ = parker.communicate(timeout=30)
        assert parker.returncode == 0
        # Each read gets the count the lock's release made, as read(2) would.
        count = p.read("wakeup_count").decode()
        assert out.splitlines() == [f"{len(count)} {count.rstrip()}"] * k, out
    finally:
        if parker.poll() is None:
            parker.kill()
            parker.wait()


# === Nobody can hang the server ==============================================

def test_blocked_reader_does_not_stop_others(mount):
    p = mount("-o", "allow_other")
    p.lock("hold")
    with Reader(p.path("wakeup_count")) as r:
        r.wait_in_read()
        assert r.blocked()
        t0 = time.monotonic()
        assert run_in_child(open_write_close, p.path("wake_lock"), b"other",
                            timeout=5) == 5
        assert run_in_child(open_read_close, p.path("wake_lock"), **USER,
                            timeout=5) == b"hold other\n"
        assert time.monotonic() - t0 < 2
        assert r.blocked()
        p.unlock("other", "hold")
        n, err, data = r.result(5)
    assert err == 0 and re.fullmatch(rb"\d+\n", data)


def test_killed_or_signalled_readers_free_their_requests(mount):
    p = mount("-d")
    p.lock("hold")
    for kind in ("kill", "signal") * 5:
        mode = "handler" if kind == "signal" else "default"
        with Reader(p.path("wakeup_count"), mode=mode) as r:
            r.wait_in_read()
            assert r.blocked(0.1)
            if kind == "kill":
                r.proc.kill()
                r.proc.wait(5)          # not stuck in the request
            else:
                r.proc.send_signal(signal.SIGUSR1)
                assert r.result(5)[:2] == (-1, errno.EINTR)
    # Each request left the server's queue of waiting reads.
    assert wait_until(lambda: p.log().count(
        "wakeup_count: blocked read interrupted") == 10)
    p.unlock("hold")
    assert re.fullmatch(rb"\d+\n", p.read("wakeup_count"))


def test_state_writer_waits_for_the_suspend_uninterruptibly(mount):
    """A write to state that is suspending cannot be interrupted: even
    SIGKILL waits until the backend ends the suspend (here a simulated
    sleep of 5 s); everyone else is served meanwhile."""
    p = mount("--simulate-sleep-ms=5000")
    w = start_writer(p.path("state"), "mem")
    conftest.wait_in_syscall(w, {"x86_64": ("1",), "aarch64": ("64",)},
                             "write")
    # The suspend has begun: the writer's request is in powerfs.
    assert wait_until(lambda: p.read("wake_lock") == b"\n" and
                      "suspending to mem" in p.log())
    w.kill()
    assert p.read("wake_lock") == b"\n"          # others are served
    assert w.poll() is None                       # SIGKILL waits
    assert w.wait(30) == -signal.SIGKILL          # until the sleep ends
    assert p.read("suspend_stats/success") == b"1\n"


def test_stuck_sysfs_backend_keeps_nobody_waiting(mount, tmp_path):
    """Documented risk: with --backend=sysfs:DIR nothing bounds the
    backing write, and while it hangs powerfs stays in the host's sleep:
    the state writer has its answer, but a write that would wait for its
    turn (state, wakeup_count) fails with EBUSY until the backing write
    returns, and a read that would block gets the count at once.  Nobody
    is kept inside a request, and other requests are served."""
    (tmp_path / "state").write_text("mem\n")
    p = mount(f"--backend=sysfs:{tmp_path}")
    os.unlink(tmp_path / "state")
    os.mkfifo(tmp_path / "state")        # open(O_WRONLY) blocks: no reader
    assert conftest.timed(p.write, "state", b"mem", timeout=2) == 3
    try:
        writer = start_writer(p.path("wakeup_count"), "0")
        assert writer.stdout.readline() == b"err %d\n" % errno.EBUSY
        p.lock("x")
        # x is in progress: the kernel would block; no event counted yet.
        assert p.read("wakeup_count") == b"0\n"
        p.unlock("x")
        assert p.read("wake_lock") == b"\n"
    finally:
        # Let the backing write through.
        fd = os.open(tmp_path / "state", os.O_RDONLY | os.O_NONBLOCK)
        got = b""
        try:
            deadline = time.monotonic() + 5
            while got != b"mem" and time.monotonic() < deadline:
                try:
                    got += os.read(fd, 64)
                except BlockingIOError:
                    pass
                time.sleep(0.01)
        finally:
            os.close(fd)
        assert got == b"mem"
    assert wait_until(lambda: p.read("suspend_stats/success") == b"1\n")


# === Containers and user namespaces ==========================================

def test_container_root_can_lock_when_modes_allow(mount):
    """Deviation: the capability counts in the writer's own user namespace
    when root made that namespace, so the root of a container that root
    started (an unprivileged uid on the host) qualifies once the admin
    opened the file to it; the same uid outside the namespace does not.
    So does another thread of a container process (a tid that is not a
    process id)."""
    p = mount("-o", "allow_other")
    with raises_errno(errno.EACCES):                # 0644: the modes first
        ct_root(open_write_close, p.path("wake_lock"), b"ct")
    os.chmod(p.path("wake_lock"), 0o666)
    os.chmod(p.path("wake_unlock"), 0o666)
    with raises_errno(errno.EPERM):
        write_as(p, "wake_lock", b"ct", **CONTAINER_ROOT)
    assert ct_root(write_holding_cap, p.path("wake_lock"), b"ct") == 2
    assert p.active() == [b"ct"]
    assert ct_root(write_holding_cap, p.path("wake_unlock"), b"ct") == 2
    assert p.active() == []

    def from_a_thread(path, data):
        tids = []

        def write():
            tids.append(threading.get_native_id())
            return write_holding_cap(path, data)
        return Background(write).wait(5), tids != [os.getpid()]
    assert ct_root(from_a_thread, p.path("wake_lock"), b"thr") == (3, True)
    p.unlock("thr")


def test_container_root_is_bound_by_the_modes(mount):
    p = mount("-o", "allow_other")
    for name in RW_FILES:
        with raises_errno(errno.EACCES):
            ct_root(open_close, p.path(name), os.O_WRONLY)
    # And it cannot change them: the files' owner (host root) is not
    # mapped in its namespace, so its capabilities do not apply to them.
    with raises_errno(errno.EPERM):
        ct_root(os.chmod, p.path("state"), 0o666)
    with raises_errno(errno.EPERM):
        ct_root(os.chown, p.path("state"), 0, 0)
    assert mode_owner(p.path("state")) == (0o644, 0, 0)
    # Without allow_other it cannot even look.
    q = mount()
    with raises_errno(errno.EACCES):
        ct_root(os.stat, q.path("state"))


def test_no_capability_check_leaves_only_the_modes(mount):
    """--no-capability-check: wake_lock and wake_unlock are guarded by the
    file modes alone."""
    p = mount("-o", "allow_other", "--no-capability-check")
    with raises_errno(errno.EACCES):
        run_in_child(open_close, p.path("wake_lock"), os.O_WRONLY, **USER)
    os.chmod(p.path("wake_lock"), 0o666)
    os.chmod(p.path("wake_unlock"), 0o666)
    assert write_as(p, "wake_lock", b"nocap", **USER) == 5
    assert p.active() == [b"nocap"]
    assert write_as(p, "wake_unlock", b"nocap", **USER) == 5


def test_self_made_user_namespace_does_not_count(mount):
    """Anyone may make a user namespace and hold every capability in it
    (unshare -Ur).  A namespace that an ordinary user made does not count:
    EPERM, as without it, for wake_lock and wake_unlock."""
    p = mount("-o", "allow_other")
    os.chmod(p.path("wake_lock"), 0o666)
    os.chmod(p.path("wake_unlock"), 0o666)
    for who in (NOBODY, USER):
        for name in ("wake_lock", "wake_unlock"):
            with raises_errno(errno.EPERM):
                write_as(p, name, b"esc", **who)
            with raises_errno(errno.EPERM):
                in_userns(unshare_as_root, write_holding_cap, p.path(name),
                          b"esc", **who)
    assert user_sources(p) == []


def test_nested_namespace_in_a_container_needs_trusted_owners(mount):
    """A namespace counts only if it and every namespace above it (up to
    powerfs's) were made by root or a trusted owner.  Inside a container
    that root started: one made by an ordinary user of the container (host
    uid 101000) never counts; one made by the container's root (host uid
    100000) counts with --trust-userns-owner=100000 only."""
    def by_ct_user(path, data):
        return in_userns(as_uid, 1000, unshare_as_root, write_holding_cap,
                         path, data, parent_map=CT_MAP)

    def by_ct_root(path, data):
        return in_userns(unshare_as_root, write_holding_cap, path, data,
                         parent_map=CT_MAP)
    p = mount("-o", "allow_other")
    q = mount("-o", "allow_other", "--trust-userns-owner=100000")
    for m in (p, q):
        os.chmod(m.path("wake_lock"), 0o666)
        with raises_errno(errno.EPERM):
            by_ct_user(m.path("wake_lock"), b"nest")
    with raises_errno(errno.EPERM):
        by_ct_root(p.path("wake_lock"), b"nest")
    assert user_sources(p) == []
    assert by_ct_root(q.path("wake_lock"), b"nest") == 4
    assert q.active() == [b"nest"]
    q.unlock("nest")


def test_trusted_owner_namespace_counts(mount):
    """--trust-userns-owner=1000 (a rootless container runtime run by uid
    1000): the namespaces uid 1000 makes count, and those made inside them
    by their root; uid 1000 itself still needs the capability, and other
    users' namespaces still do not count."""
    p = mount("-o", "allow_other", "--trust-userns-owner=1000")
    os.chmod(p.path("wake_lock"), 0o666)
    with raises_errno(errno.EPERM):
        write_as(p, "wake_lock", b"rl", **USER)
    with raises_errno(errno.EPERM):
        in_userns(unshare_as_root, write_holding_cap, p.path("wake_lock"),
                  b"rl", **OTHER)
    assert in_userns(unshare_as_root, write_holding_cap, p.path("wake_lock"),
                     b"rl", **USER) == 2
    assert in_userns(unshare_as_root, unshare_as_root, write_holding_cap,
                     p.path("wake_lock"), b"rl2", **USER) == 3
    assert p.active() == [b"rl", b"rl2"]
    p.unlock("rl", "rl2")


def test_root_regains_the_capability_in_a_namespace_it_makes(mount):
    """Documented risk: root (uid 0) is a trusted owner, so root that lacks
    CAP_BLOCK_SUSPEND gets it back by making a user namespace, where it
    keeps kernel uid 0 (no allow_other or chmod needed).  The kernel would
    refuse it."""
    p = mount()
    with raises_errno(errno.EPERM):
        write_as(p, "wake_lock", b"esc", drop_caps=[CAP_BLOCK_SUSPEND])
    assert in_userns(unshare_as_root, write_holding_cap, p.path("wake_lock"),
                     b"esc", drop_caps=[CAP_BLOCK_SUSPEND]) == 3
    assert p.active() == [b"esc"]
    p.unlock("esc")


def test_any_writer_can_unlock_any_lock(mount):
    """Locks have no owner: a container allowed to write wake_unlock can
    release the host's locks (as in the kernel)."""
    p = mount("-o", "allow_other")
    os.chmod(p.path("wake_unlock"), 0o666)
    p.lock("host-lock")
    assert ct_root(open_write_close, p.path("wake_unlock"), b"host-lock") \
        == 9
    assert p.active() == []


def test_state_needs_write_access_only(mount):
    """state takes no capability: whoever may write it may suspend (with
    the logind or sysfs:/sys/power backend: the host)."""
    p = mount("-o", "allow_other", "--simulate-sleep-ms=10")
    os.chmod(p.path("state"), 0o666)
    assert write_as(p, "state", b"mem", **CONTAINER_ROOT) == 3
    assert ct_root(open_write_close, p.path("state"), b"freeze") == 6
    assert p.read("suspend_stats/success") == b"2\n"


def test_writer_outside_powerfs_pid_namespace_judged_by_uid(mount, tmp_path,
                                                           monkeypatch):
    """A writer that powerfs cannot see (powerfs runs in a child pid
    namespace) arrives with pid 0: uid 0 is then enough, without the
    capability."""
    wrapper = tmp_path / "pidns-powerfs"
    wrapper.write_text("#!/bin/sh\nexec unshare --pid --fork --kill-child "
                       f"'{conftest.POWERFS}' \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setattr(conftest, "POWERFS", str(wrapper))
    p = mount("-d")
    assert write_as(p, "wake_lock", b"pid0",
                    drop_caps=[CAP_BLOCK_SUSPEND]) == 4
    assert p.active() == [b"pid0"]
    assert 'write wake_lock "pid0" by pid 0 uid 0: ok' in p.log()
    p.unlock("pid0")


def test_without_a_proc_of_its_pid_namespace_writers_get_eperm(
        mount, tmp_path, monkeypatch):
    """powerfs in a child pid namespace with the parent's /proc (unshare
    --pid without --mount-proc): /proc/PID would show another task than the
    writer, so the writers of powerfs's pid namespace get EPERM, root with
    the capability included, and the log says why.  Writers outside it
    (pid 0) are still judged by uid."""
    wrapper = tmp_path / "pidns-powerfs"
    wrapper.write_text("#!/bin/sh\nexec unshare --pid --fork --kill-child "
                       f"'{conftest.POWERFS}' \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setattr(conftest, "POWERFS", str(wrapper))
    p = mount("-d")
    with open(f"/proc/{p.proc.pid}/task/{p.proc.pid}/children") as f:
        server = int(f.read().split()[0])

    def in_its_pid_namespace(fn, *args):
        CLONE_NEWPID = 0x20000000
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/proc/{server}/ns/pid", os.O_RDONLY)
        assert libc.setns(fd, CLONE_NEWPID) == 0, os.strerror(
            ctypes.get_errno())
        return run_in_child(fn, *args)      # a child is born in it

    def pid_and_write(path, data):
        assert effective_caps() & (1 << CAP_BLOCK_SUSPEND)
        pid = os.getpid()
        try:
            return pid, open_write_close(path, data)
        except OSError as e:
            return pid, errno.errorcode[e.errno]
    pid, res = run_in_child(in_its_pid_namespace, pid_and_write,
                            p.path("wake_lock"), b"inside")
    assert res == "EPERM"
    assert (f'write wake_lock "inside" by pid {pid} uid 0: '
            "Operation not permitted") in p.log()
    assert "/proc is not the proc of powerfs's pid namespace" in p.log()
    assert write_as(p, "wake_lock", b"outside") == 7     # pid 0, uid 0
    assert p.active() == [b"outside"]
    p.unlock("outside")


def test_without_cap_sys_ptrace_writers_get_eperm_and_the_log_says_why(
        mount, tmp_path, monkeypatch):
    """powerfs reads a writer's /proc/TID/ns/user, which the kernel allows
    only to those who may ptrace the writer: started without
    CAP_SYS_PTRACE, powerfs refuses root writers that hold more
    capabilities than itself, and says so once in its log."""
    wrapper = tmp_path / "noptrace-powerfs"
    wrapper.write_text("#!/bin/sh\nexec setpriv --bounding-set -sys_ptrace "
                       f"--inh-caps -sys_ptrace '{conftest.POWERFS}' "
                       "\"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setattr(conftest, "POWERFS", str(wrapper))
    p = mount()
    for _ in range(2):
        with raises_errno(errno.EPERM):
            p.write("wake_lock", b"noptrace")
    assert p.log().count("(powerfs needs CAP_SYS_PTRACE)") == 1
    assert user_sources(p) == []


# === Root, backends ==========================================================

def test_sysfs_backend_refuses_its_own_mount_point(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    (mnt / "state").write_text("mem\n")
    (tmp_path / "link").symlink_to(mnt)
    for backend in (mnt, tmp_path / "link", f"{mnt}/."):
        r = subprocess.run([conftest.POWERFS, "-f",
                            f"--backend=sysfs:{backend}", str(mnt)],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 2, r.stderr
        assert "loop" in r.stderr
        assert not os.path.ismount(mnt)


def test_sysfs_backend_writes_as_root_where_dir_state_points(mount, tmp_path):
    """Documented risk: DIR/state is opened as root, symlinks followed;
    whoever can write DIR chooses the file powerfs writes the state name
    into.  DIR must be writable by root only."""
    victim = tmp_path / "victim"
    victim.write_text("freeze mem disk\n")
    d = tmp_path / "dir"
    d.mkdir()
    (d / "state").symlink_to(victim)
    p = mount(f"--backend=sysfs:{d}")
    assert p.write("state", b"mem") == 3
    # The write is answered when the sleep begins, just before powerfs
    # writes DIR/state.
    assert wait_until(lambda: victim.read_text() == "memeze mem disk\n", 5), \
        victim.read_text()


@pytest.fixture
def logind(monkeypatch, tmp_path):
    pytest.importorskip("dbus")
    import test_logind
    li = test_logind.Logind(str(tmp_path))
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", li.address)
    try:
        li.start_mock()
        yield li
    finally:
        li.close()


def test_logind_suspend_is_powerfs_noninteractive_call(logind, mount):
    """An unprivileged writer allowed to write state makes powerfs (root)
    call Suspend(false): logind judges powerfs, not the writer."""
    p = mount("-o", "allow_other", "--backend=logind")
    os.chmod(p.path("state"), 0o666)
    w = Background(lambda: write_as(p, "state", b"mem", **USER))
    assert wait_until(lambda: logind.calls("Suspend"), 5)
    assert logind.calls("Suspend") == [[False]]
    logind.prepare_for_sleep(True)
    assert w.wait(5) == 3
    logind.prepare_for_sleep(False)
    assert wait_until(lambda: p.read("suspend_stats/success") == b"1\n")


def test_logind_suspend_timeout_bounds_the_state_writer(logind, mount):
    """A sleep that never begins (a block inhibitor, a slow polkit) ends
    the write with EBUSY after --suspend-timeout; until then the writer
    cannot be killed."""
    p = mount("--backend=logind", "--suspend-timeout=1")
    w = start_writer(p.path("state"), "mem")
    assert wait_until(lambda: logind.calls("Suspend"), 5)
    t0 = time.monotonic()
    w.kill()
    w.wait(5)
    assert 0.5 < time.monotonic() - t0 < 3
    assert wait_until(lambda: p.read("suspend_stats/fail") == b"1\n")
    assert p.read("suspend_stats/last_failed_errno") == b"-16\n"


def test_container_lock_holds_block_inhibitor(logind, mount):
    """With --inhibit-sleep a container's wake lock becomes a logind block
    inhibitor held by powerfs: the container keeps the host awake."""
    p = mount("-o", "allow_other", "--backend=logind", "--inhibit-sleep")
    os.chmod(p.path("wake_lock"), 0o666)
    os.chmod(p.path("wake_unlock"), 0o666)

    def blocks():
        return [i for i in logind.powerfs_inhibitors() if i[3] == "block"]
    assert ct_root(open_write_close, p.path("wake_lock"), b"ctr") == 3
    assert wait_until(blocks)
    assert blocks() == [("sleep", "powerfs", "powerfs: held by ctr",
                         "block")]
    ct_root(open_write_close, p.path("wake_unlock"), b"ctr")
    assert wait_until(lambda: not blocks())


# === The state file ==========================================================

BOOT_ID = open("/proc/sys/kernel/random/boot_id").read().strip()
HEADER = b"powerfs-state 2 %s\n" % BOOT_ID.encode()


def test_state_file_is_0600_and_never_missing_or_headless(mount, tmp_path):
    """The log is appended to, and now and then replaced by a snapshot
    renamed into place: a reader always finds the file, with its header;
    it is 0600; no temporary file stays."""
    state = tmp_path / "state"
    state.write_text("")                 # world-readable, not a state file
    os.chmod(state, 0o644)
    ino = os.stat(state).st_ino
    p = mount(f"--state-file={state}")
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
    assert os.stat(state).st_ino != ino          # renamed into place
    seen, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            try:
                seen.append(state.read_bytes()[:len(HEADER)])
            except FileNotFoundError:
                seen.append(None)

    t = threading.Thread(target=watch)
    t.start()
    try:
        # Churn until the log has been replaced twice (by count of changes,
        # not by time: a busy machine makes fewer in a given time).
        inodes = {os.stat(state).st_ino}
        deadline = time.monotonic() + 60
        i = 0
        while len(inodes) < 3 and time.monotonic() < deadline:
            p.lock(b"a%d" % (i % 50))
            p.unlock(b"a%d" % (i % 50))
            inodes.add(os.stat(state).st_ino)
            i += 1
    finally:
        stop.set()
        t.join()
    assert len(inodes) > 1                      # compacted, renamed
    assert None not in seen                     # never missing
    assert set(seen) == {HEADER}                # never headless
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
    finish(p)
    assert sorted(os.listdir(tmp_path)) == ["state"]


def test_state_file_symlink_is_replaced_not_followed(mount, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    state = tmp_path / "state"
    state.symlink_to(victim)
    p = mount(f"--state-file={state}")
    p.lock("x")
    p.unlock("x")
    assert not os.path.islink(state)
    assert victim.read_text() == "precious\n"
    assert state.read_bytes().startswith(HEADER)
    # Not even read through the link.
    assert "unusable, starting clean" in p.log()


def test_state_file_values_are_checked_line_by_line(mount, tmp_path):
    """A line with a value out of range (a count that is not a number, a
    time near INT64_MAX, a deadline past 2^32 ms, a bad name) is dropped
    and counted; the other lines are restored."""
    state = tmp_path / "state"
    a = mount(f"--state-file={state}", "--simulate-sleep-ms=10")
    a.lock("keep")
    a.unlock("keep")
    a.lock("held")
    os.chown(a.path("wake_lock"), 1000, 1000)
    os.chmod(a.path("wake_lock"), 0o666)
    finish(a)
    good = state.read_text()
    held = next(l for l in good.splitlines() if l.startswith("lock 68656c64 "))
    f = held.split(" ")
    assert f[2] == "1"                          # active
    # A valid file restores all of it (control) ...
    b = mount(f"--state-file={state}")
    assert b.active() == [b"held"] and b.inactive() == [b"keep"]
    assert mode_owner(b.path("wake_lock")) == (0o666, 1000, 1000)
    finish(b)
    big = str(2 ** 63 - 1)
    bad_lines = [
        " ".join(f[:2] + ["maybe"] + f[3:]),            # active
        " ".join(f[:9] + [big] + f[10:]),               # last_time
        " ".join(f[:7] + [big, big] + f[9:]),           # total, max
        " ".join(f[:13] + [str(2 ** 62)]),              # deadline
        " ".join(["lock", "6b00"] + f[2:]),             # NUL in the name
        " ".join(["lock", "zz"] + f[2:]),
        " ".join(f + ["extra"]),
    ]
    for line in bad_lines:
        state.write_text(good.replace(held, line))
        c = mount(f"--state-file={state}")
        assert c.active() == [], line
        assert c.inactive() == [b"keep"]
        assert mode_owner(c.path("wake_lock")) == (0o666, 1000, 1000)
        assert "dropped 1 lines with a value out of range" in c.log(), line
        finish(c)
    # wakeup_sources never shows a wrapped or negative number.
    for line in bad_lines:
        assert big not in state.read_text()


def test_state_file_names_are_length_checked(mount, tmp_path):
    """A lock name restored from the state file is held to what a write can
    carry (4096 bytes): a longer one is dropped."""
    state = tmp_path / "state"
    a = mount(f"--state-file={state}")
    a.lock("x")
    a.unlock("x")
    finish(a)
    text = state.read_text()
    assert "\nlock 78 " in text
    state.write_text(text.replace("\nlock 78 ", "\nlock " + "61" * 4096 + " "))
    b = mount(f"--state-file={state}")
    assert [len(n) for n in b.sources() if n.startswith(b"aaa")] == [4096]
    finish(b)
    state.write_text(text.replace("\nlock 78 ", "\nlock " + "61" * 4097 + " "))
    c = mount(f"--state-file={state}")
    assert c.read("wake_unlock") == b"\n"
    # (Every line of x is dropped: the lock line and the unlock line.)
    assert re.search(r"dropped [1-9][0-9]* lines with a value out of range",
                     c.log())


# === Parsing =================================================================

def test_stores_see_a_nul_terminated_copy(mount):
    """Every store gets its own bounded copy ending in NUL: bytes after a
    NUL are never parsed."""
    p = mount()
    assert p.write("wake_lock", b"nul\0 junk 5") == 11
    assert p.active() == [b"nul"]
    assert p.write("wake_unlock", b"nul\0junk") == 8
    assert p.active() == []
    assert p.write("autosleep", b"off\0junk") == 8
    assert p.read("autosleep") == b"off\n"
    with raises_errno(errno.EINVAL):
        p.write("state", b"mem\0")
