#!/usr/bin/python3
"""Android's clients of /sys/power, replayed system call for system call.

Run as root inside scripts/powerfs-container (powerfs bound over /sys/power):

    client.py SCENARIO [ARG...]

CLIENT_SYS_POWER, CLIENT_WAKEUP_REASONS and CLIENT_CLASS_WAKEUP, if set,
name the directories that stand for /sys/power, /sys/kernel/wakeup_reasons
and /sys/class/wakeup (a powerfs mount seen from outside a mount
namespace).

The process first plays init (the /sys/power lines of init.rc), then forks
children that take Android's uids, groups and capabilities and replay what
the client does: the same files, open flags, buffer sizes, offsets and write
payloads.  The scenario prints one JSON line on stdout; tests/test_android.py
asserts on it.  Bytes are carried as latin-1 strings, failed calls as the
errno name ("EINVAL").

Nothing here asserts: a child records what each call returned and the test
compares that with SPEC.md and the kernel.  An exception in a child is
raised again in the parent (exit status 1, traceback on stderr).
"""

import ctypes
import errno
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
import traceback

P = os.environ.get("CLIENT_SYS_POWER", "/sys/power").rstrip("/") + "/"
CLASS_WAKEUP = os.environ.get("CLIENT_CLASS_WAKEUP", "/sys/class/wakeup")

# Android's ids (system/core/libcutils/include/private/android_filesystem_config.h)
AID_SYSTEM = 1000
AID_RADIO = 1001
AID_WAKELOCK = 3010
AID_APP = 10050                  # some app (AID_APP_START + 50)
AID_EVERYBODY, AID_INET = 9997, 3003
# Zygote's forkSystemServer(): --setgroups=
SYSTEM_SERVER_GROUPS = [1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009,
                        1010, 1018, 1021, 1023, 1024, 1032, 1065, 3001, 3002,
                        3003, 3006, 3007, 3009, 3010]
APP_GROUPS = [AID_EVERYBODY, AID_INET]

CAP_BLOCK_SUSPEND = 36
PR_SET_KEEPCAPS = 8
PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 47, 2
AT_FDCWD, AT_SYMLINK_NOFOLLOW = -100, 0x100

# Wake lock names Android really uses (PowerManagerService, AlarmManager,
# JobScheduler, rild, SensorService, ...).
NAMES = [b"PowerManagerService.WakeLocks", b"PowerManagerService.Display",
         b"PowerManagerService.Broadcasts", b"*alarm*", b"radio-interface",
         b"KeyEvents", b"SensorService_wakelock", b"NetworkStats",
         b"*job*/com.android.providers.downloads/.DownloadJobService",
         b"*launch*", b"GnssLocationProvider", b"ActivityManager-Sleep",
         b"*sync*/com.android.contacts/com.google/someone@gmail.com",
         b"AudioMix", b"NlpWakeLock", b"wlan_rx_wake"]

libc = ctypes.CDLL(None, use_errno=True)
libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.read.restype = ctypes.c_ssize_t
libc.fchmodat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint,
                          ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong,
                       ctypes.c_ulong, ctypes.c_ulong]


def mono():
    return time.monotonic()


def ename(e):
    return errno.errorcode.get(e, str(e))


def attempt(fn, *args):
    """fn(*args), or the errno name of the OSError it raised."""
    try:
        return fn(*args)
    except OSError as e:
        return ename(e.errno)


def out(x):
    """Make x JSON-friendly: bytes become latin-1 strings."""
    if isinstance(x, bytes):
        return x.decode("latin-1")
    if isinstance(x, dict):
        return {str(k): out(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [out(v) for v in x]
    return x


# --- system calls as C sees them ---------------------------------------------

def sys_read(fd, size):
    """One read(2) through libc (Python's os.read would retry EINTR)."""
    buf = ctypes.create_string_buffer(size)
    n = libc.read(fd, buf, size)
    if n < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return buf.raw[:n]


def retry_read(fd, size, eintr=None):
    """TEMP_FAILURE_RETRY(read(fd, buf, size)); eintr: a list counting the
    EINTR results."""
    while True:
        try:
            return sys_read(fd, size)
        except InterruptedError:
            if eintr is not None:
                eintr.append(mono())


def write(fd, data):
    """One write(2): the count, or the errno name."""
    return attempt(os.write, fd, data)


def read_once(path, size=8192):
    """open, one read(2) of size bytes, close: the bytes or the errno name."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        return ename(e.errno)
    try:
        return attempt(sys_read, fd, size)
    finally:
        os.close(fd)


def read_fd_to_string(fd, reads=None):
    """android::base::ReadFdToString: fstat to reserve, then 4096-byte reads
    until one returns 0."""
    os.fstat(fd)
    data = b""
    while True:
        t0 = mono()
        chunk = retry_read(fd, 4096)
        if reads is not None:
            reads.append([chunk, round(mono() - t0, 4)])
        if not chunk:
            return data
        data += chunk


def fd_pos(fd):
    """The file offset, from /proc (no system call on fd itself)."""
    with open(f"/proc/self/fdinfo/{fd}") as f:
        for line in f:
            if line.startswith("pos:"):
                return int(line.split()[1])
    raise AssertionError("no pos in fdinfo")


def stat_counter(name):
    return int(read_once(P + "suspend_stats/" + name))


def caps_of_self():
    caps = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("CapEff:", "CapPrm:", "CapInh:", "CapAmb:")):
                k, v = line.split()
                caps[k[:-1]] = bool(int(v, 16) & (1 << CAP_BLOCK_SUSPEND))
    return caps


# --- credentials ---------------------------------------------------------------

class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _check(rc, what):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def set_caps(caps, inheritable=False):
    """capset: exactly caps in the effective and permitted sets (and the
    inheritable set, for ambient capabilities)."""
    hdr = _CapHeader(0x20080522, 0)          # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    for c in caps:
        data[c // 32].effective |= 1 << (c % 32)
        data[c // 32].permitted |= 1 << (c % 32)
        if inheritable:
            data[c // 32].inheritable |= 1 << (c % 32)
    _check(libc.capset(ctypes.byref(hdr), data), "capset")


def become(uid, groups, caps=(), ambient=False):
    """What Zygote (caps kept through setuid, then capset) or init (ambient
    capabilities from a service's `capabilities` line) do before running
    the client as uid with primary group uid."""
    os.setgroups(list(groups))
    os.setresgid(uid, uid, uid)
    if caps:
        _check(libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0), "PR_SET_KEEPCAPS")
    os.setresuid(uid, uid, uid)
    if caps:
        set_caps(caps, inheritable=ambient)
        if ambient:
            for c in caps:
                _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0),
                       "PR_CAP_AMBIENT_RAISE")
    else:
        set_caps(())


# conftest.py's POWERFS_TEST_TIME_SCALE, which powerfs-container passes on:
# the deadlines here stretch with the suite's.
TIME_SCALE = max(1.0, float(os.environ.get("POWERFS_TEST_TIME_SCALE") or 1))


class ChildFailed(Exception):
    pass


class Child:
    """fork(); the child takes the credentials, then either runs fn(*args)
    or (service=NAME) execs this script as `service NAME ARGS` like init
    starting a service (ambient capabilities survive the exec).  The result
    travels back as JSON through a pipe."""

    def __init__(self, fn=None, *args, uid=None, groups=(), caps=(),
                 ambient=False, service=None):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                if uid is not None:
                    become(uid, groups, caps, ambient)
                if service:
                    os.dup2(w, 1)
                    os.close(w)
                    os.execv(sys.executable, [sys.executable, __file__,
                                              "service", service,
                                              *map(str, args)])
                res = {"ok": out(fn(*args))}
            except BaseException:      # noqa: B036 - reported to the parent
                res = {"exception": traceback.format_exc()}
            try:
                data = json.dumps(res).encode() + b"\n"
                while data:
                    data = data[os.write(w, data):]
            finally:
                os._exit(0)
        os.close(w)
        self.pid, self.r, self.buf = pid, r, b""

    def wait(self, timeout=10.0):
        timeout *= TIME_SCALE
        deadline = mono() + timeout
        try:
            while True:
                left = deadline - mono()
                if left <= 0:
                    raise ChildFailed(f"child {self.pid} still running after "
                                      f"{timeout}s")
                ready, _, _ = select.select([self.r], [], [], left)
                if ready:
                    c = os.read(self.r, 65536)
                    if not c:
                        break
                    self.buf += c
        finally:
            os.close(self.r)
            try:
                os.kill(self.pid, 9)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
        if not self.buf:
            raise ChildFailed(f"child {self.pid} died without a result")
        res = json.loads(self.buf.splitlines()[-1])
        if "exception" in res:
            raise ChildFailed("child raised:\n" + res["exception"])
        return res["ok"]


def as_system_server(fn, *args, **kw):
    """fn in a process with system_server's credentials: uid/gid system,
    its supplementary groups (wakelock among them), CAP_BLOCK_SUSPEND kept
    through setuid by PR_SET_KEEPCAPS and capset (Zygote's way)."""
    return Child(fn, *args, uid=AID_SYSTEM, groups=SYSTEM_SERVER_GROUPS,
                 caps=[CAP_BLOCK_SUSPEND], **kw).wait()


def start_service(name, *args, uid, groups, caps=(CAP_BLOCK_SUSPEND,),
                  timeout=10.0):
    """A native service started by init: `user`, `group`, `capabilities`
    lines of its .rc file (ambient capabilities), then execve."""
    return Child(None, *args, uid=uid, groups=groups, caps=list(caps),
                 ambient=bool(caps), service=name).wait(timeout)


def in_other_process(fn, *args):
    """fn in a forked process with this process's credentials (another
    thread of the platform, e.g. PowerManagerService taking a lock)."""
    return Child(fn, *args).wait()


def lock(*names):
    """Take wake locks the libhardware_legacy way (one O_RDWR fd)."""
    fd = os.open(P + "wake_lock", os.O_RDWR | os.O_CLOEXEC)
    try:
        return [write(fd, n) for n in names]
    finally:
        os.close(fd)


def unlock(*names):
    fd = os.open(P + "wake_unlock", os.O_RDWR | os.O_CLOEXEC)
    try:
        return [write(fd, n) for n in names]
    finally:
        os.close(fd)


def lock_unlock(name):
    return lock(name) + unlock(name)


# --- init -----------------------------------------------------------------------

def android_init():
    """The /sys/power lines of init.rc (`on boot`), the way init runs them:
    chown -> lchown(2), chmod -> fchmodat(AT_SYMLINK_NOFOLLOW) (a setattr
    for FUSE), write -> open(O_WRONLY|O_CREAT|O_TRUNC|O_NOFOLLOW|O_CLOEXEC,
    0600) and one write.  Returns what each step returned (0 = success)."""
    steps = {}

    def chown(path, uid, gid):
        steps["chown " + path] = attempt(lambda: os.lchown(path, uid, gid) or 0)

    def chmod(path, mode):
        rc = libc.fchmodat(AT_FDCWD, path.encode(), mode, AT_SYMLINK_NOFOLLOW)
        steps["chmod " + path] = 0 if rc == 0 else ename(ctypes.get_errno())

    def write_file(path, content):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                         | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:
            steps["write " + path] = ename(e.errno)
            return
        try:
            steps["write " + path] = write(fd, content)
        finally:
            os.close(fd)

    chown(P + "autosleep", AID_SYSTEM, AID_SYSTEM)
    chown(P + "state", AID_SYSTEM, AID_SYSTEM)
    chown(P + "wakeup_count", AID_SYSTEM, AID_SYSTEM)
    chown(P + "wake_lock", AID_RADIO, AID_WAKELOCK)
    chown(P + "wake_unlock", AID_RADIO, AID_WAKELOCK)
    chmod(P + "state", 0o660)
    chmod(P + "wake_lock", 0o660)
    chmod(P + "wake_unlock", 0o660)
    write_file(P + "wake_lock", b"zygote_kwl")
    return steps


def boot():
    """init, then the boot wake lock goes (so that suspend is possible)."""
    steps = android_init()
    steps["release zygote_kwl"] = unlock(b"zygote_kwl")
    return steps


# --- scenarios ------------------------------------------------------------------

SCENARIOS = {}
SERVICES = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def service(fn):
    SERVICES[fn.__name__] = fn
    return fn


def try_open(path, flags):
    try:
        os.close(os.open(path, flags | os.O_CLOEXEC))
        return "ok"
    except OSError as e:
        return ename(e.errno)


OPEN_CHECKS = [("wake_lock", os.O_RDWR), ("wake_lock", os.O_WRONLY),
               ("wake_lock", os.O_RDONLY), ("wake_unlock", os.O_RDWR),
               ("state", os.O_RDWR), ("state", os.O_RDONLY),
               ("wakeup_count", os.O_RDWR), ("wakeup_count", os.O_RDONLY),
               ("autosleep", os.O_WRONLY), ("autosleep", os.O_RDONLY),
               ("suspend_stats/success", os.O_RDONLY)]
FLAG_NAMES = {os.O_RDWR: "O_RDWR", os.O_WRONLY: "O_WRONLY",
              os.O_RDONLY: "O_RDONLY"}


def open_checks():
    return {f"{name} {FLAG_NAMES[fl]}": try_open(P + name, fl)
            for name, fl in OPEN_CHECKS}


@scenario
def init_permissions():
    """init's chown/chmod/write, then who may open what."""
    res = {"init": android_init()}
    res["stat"] = {}
    for name in ("wake_lock", "wake_unlock", "state", "wakeup_count",
                 "autosleep"):
        st = os.stat(P + name)
        res["stat"][name] = [oct(st.st_mode & 0o7777), st.st_uid, st.st_gid,
                             st.st_size]
    res["listing"] = read_once(P + "wake_lock")
    res["system"] = Child(open_checks, uid=AID_SYSTEM,
                          groups=SYSTEM_SERVER_GROUPS).wait()
    # rild: the owner of wake_lock, here without the wakelock group.
    res["radio"] = Child(open_checks, uid=AID_RADIO, groups=[]).wait()
    res["app"] = Child(open_checks, uid=AID_APP, groups=APP_GROUPS).wait()
    return res


def legacy_client(iterations):
    """libhardware_legacy's power.c (Android <= 9): wake_lock and
    wake_unlock opened once O_RDWR|O_CLOEXEC; acquire_wake_lock() and
    release_wake_lock() are one write(fd, id, strlen(id)) each, never a
    seek, for the life of the process."""
    iterations = int(iterations)
    fds = [os.open(P + "wake_lock", os.O_RDWR | os.O_CLOEXEC),
           os.open(P + "wake_unlock", os.O_RDWR | os.O_CLOEXEC)]
    written = [0, 0]
    bad = []
    missing = []
    for i in range(iterations):
        name = NAMES[i % len(NAMES)]
        for k in (0, 1):
            n = write(fds[k], name)
            if n == len(name):
                written[k] += n
            else:
                bad.append([i, k, name, n, fd_pos(fds[k])])
            if k == 0 and i % 500 == 0:
                listing = read_once(P + "wake_lock")
                if not isinstance(listing, bytes) or \
                        name not in listing.split():
                    missing.append([i, fd_pos(fds[0]), listing])
        if len(bad) > 10:
            break
    # Locks are not counted: lock twice, unlock once.
    twice = [write(fds[0], b"twice"), write(fds[0], b"twice"),
             write(fds[1], b"twice")]
    pos = [fd_pos(fd) for fd in fds]
    # Months of uptime in a moment: the offsets jump to just below 2^31 and
    # 2^32 (where ~70 and ~140 million writes of ~30 bytes take them) and
    # the writes go on across the boundary.  The only seeks in the replay.
    long_life = []
    for base in (2**31 - 7, 2**32 - 7):
        for fd in fds:
            os.lseek(fd, base, os.SEEK_SET)
        steps = []
        for name in NAMES[:4]:
            n = write(fds[0], name)
            listing = read_once(P + "wake_lock")
            steps.append([n, isinstance(listing, bytes)
                          and name in listing.split(), write(fds[1], name)])
        long_life.append({"base": base, "steps": steps,
                          "advanced": [fd_pos(fd) - base for fd in fds]})
    return {"iterations": iterations, "written": written, "pos": pos,
            "long_life": long_life,
            "bad": bad, "missing": missing, "twice": twice,
            "listing": read_once(P + "wake_lock"),
            "unlisting": read_once(P + "wake_unlock"),
            "caps": caps_of_self()}


service(legacy_client)


@scenario
def legacy(who, iterations="3500"):
    """who: system_server (caps kept through setuid) or rild (radio, the
    owner, started by init with ambient CAP_BLOCK_SUSPEND)."""
    res = {"init": boot()}
    if who == "system_server":
        res["client"] = as_system_server(legacy_client, iterations)
    else:
        res["client"] = start_service("legacy_client", iterations,
                                      uid=AID_RADIO, groups=[AID_RADIO])
    return res


def nocap_client():
    fds = [os.open(P + "wake_lock", os.O_RDWR | os.O_CLOEXEC),
           os.open(P + "wake_unlock", os.O_RDWR | os.O_CLOEXEC)]
    name = b"PowerManagerService.WakeLocks"
    res = {"caps": caps_of_self(),
           "lock": write(fds[0], name),
           "listing": read_once(P + "wake_lock"),
           "unlock": write(fds[1], name),
           "listing_after": read_once(P + "wake_lock"),
           "lock_newline": write(fds[0], b"\n"),
           "unlock_newline": write(fds[1], b"\n")}
    for fd in fds:
        os.close(fd)
    return res


@scenario
def nocap():
    """uid system in group wakelock but without CAP_BLOCK_SUSPEND (setuid
    without PR_SET_KEEPCAPS drops every capability)."""
    res = {"init": boot()}
    res["system"] = Child(nocap_client, uid=AID_SYSTEM,
                          groups=SYSTEM_SERVER_GROUPS).wait()
    res["app"] = Child(open_checks, uid=AID_APP, groups=APP_GROUPS).wait()
    return res


# The suspend loop.  STYLES: how the wakeup count is read and written back.
#   libsuspend:     autosuspend_wakeup_count.c (4.4-9): char wakeup_count[20];
#                   read(fd, wakeup_count, sizeof); write back what was read.
#   readfdtostring: ReadFdToString (reads until EOF), written back trimmed.
#   systemsuspend:  SystemSuspend readFd(): one read of BUFSIZ (1024) bytes,
#                   written back as read.

def read_count(fd, style, eintr=None):
    """lseek(fd, 0, SEEK_SET), then the read(s) of the style.  Returns
    (payload to write back, list of [bytes, seconds] per read)."""
    os.lseek(fd, 0, os.SEEK_SET)
    reads = []
    if style == "readfdtostring":
        data = read_fd_to_string(fd, reads)
        return data.strip(), reads
    size = 20 if style == "libsuspend" else 1024
    t0 = mono()
    data = retry_read(fd, size, eintr)
    reads.append([data, round(mono() - t0, 4)])
    return data, reads


class SuspendLoop:
    """The suspend thread's kept fds: state and wakeup_count, O_RDWR."""

    def __init__(self, style):
        self.style = style
        self.state = os.open(P + "state", os.O_RDWR | os.O_CLOEXEC)
        self.wc = os.open(P + "wakeup_count", os.O_RDWR | os.O_CLOEXEC)

    def read(self):
        self.count, self.reads = read_count(self.wc, self.style)
        return self.count

    def write_back(self):
        return write(self.wc, self.count)

    def suspend(self):
        t0 = mono()
        r = write(self.state, b"mem")
        return r, round(mono() - t0, 4)

    def cycle(self):
        count = self.read()
        wb = self.write_back()
        mem = self.suspend() if wb == len(count) else None
        return {"reads": self.reads, "writeback": wb, "mem": mem,
                "pos_after_writeback": fd_pos(self.wc)}


def stats():
    return {n: read_once(P + "suspend_stats/" + n)
            for n in ("success", "fail", "failed_freeze", "last_failed_errno",
                      "last_failed_step")}


def suspend_cycles(style, cycles):
    loop = SuspendLoop(style)
    before = stats()
    res = {"size": os.fstat(loop.wc).st_size,
           "cycles": [loop.cycle() for _ in range(int(cycles))]}
    res["before"], res["after"] = before, stats()
    return res


@scenario
def suspend_loop(style, cycles="3"):
    return {"init": boot(),
            "loop": as_system_server(suspend_cycles, style, cycles)}


def blocking_client(style):
    loop = SuspendLoop(style)
    first = loop.cycle()
    c0 = int(loop.read())
    res = {"first": first, "c0": c0}
    # PowerManagerService takes a lock (another process).
    res["lock"] = in_other_process(lock, b"PowerManagerService.WakeLocks")
    # The process that releases it is forked now, before the read blocks:
    # on Linux 6.1 a fork() while a thread waits in a FUSE read can leave
    # that read's bytes in the child's copy of the buffer's page (the read
    # returned the right length of zeros or heap bytes in the check-vm
    # guest), which no Android client does and 6.18 does not show.
    go_r, go_w = os.pipe()

    def unlock_when_told():
        os.read(go_r, 1)
        return unlock(b"PowerManagerService.WakeLocks")
    releaser = Child(unlock_when_told)
    box = {}

    def reader():
        try:
            box["count"] = loop.read()
        except OSError as e:
            box["count"] = ename(e.errno)
        box["t"] = mono()
    cpu0 = os.times()
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    t.join(0.3)
    res["blocked_after_0.3s"] = t.is_alive()
    cpu1 = os.times()
    res["cpu_while_blocked"] = round((cpu1.user - cpu0.user)
                                     + (cpu1.system - cpu0.system), 3)
    t_unlock = mono()
    os.write(go_w, b"u")
    res["unlock"] = releaser.wait()
    for fd in (go_r, go_w):
        os.close(fd)
    t.join(5)
    res["returned"] = not t.is_alive()
    if res["returned"]:
        res["count"] = box["count"]
        res["latency_after_unlock"] = round(box["t"] - t_unlock, 4)
        res["reads"] = loop.reads
        res["writeback"] = loop.write_back()
        res["mem"] = loop.suspend()
    return res


@scenario
def blocking(style):
    return {"init": boot(),
            "loop": as_system_server(blocking_client, style)}


def handshake_client():
    loop = SuspendLoop("systemsuspend")
    res = {}
    # A: an event between the read and the write-back: stale count.
    c = loop.read()
    res["A_count"] = c
    res["A_event"] = in_other_process(lock_unlock, b"NetworkStats")
    res["A_writeback"] = loop.write_back()
    # B: a lock taken after the write-back: "mem" must fail.
    res["B_count"] = loop.read()
    res["B_writeback"] = loop.write_back()
    res["B_lock"] = in_other_process(lock, b"AudioMix")
    before = stats()
    res["B_mem"] = loop.suspend()
    res["B_stats"] = [before, stats()]
    res["B_unlock"] = in_other_process(unlock, b"AudioMix")
    # C: an event (lock and unlock) after the write-back: count changed.
    res["C_count"] = loop.read()
    res["C_writeback"] = loop.write_back()
    res["C_event"] = in_other_process(lock_unlock, b"KeyEvents")
    res["C_mem"] = loop.suspend()
    # D: a clean cycle succeeds again.
    before = stats()
    res["D"] = loop.cycle()
    res["D_count"] = loop.count
    res["D_stats"] = [before, stats()]
    return res


@scenario
def handshake():
    return {"init": boot(), "loop": as_system_server(handshake_client)}


def eof_client():
    """Android 10's ReadFdToString on wakeup_count with a lock taken by
    another process between the first read and the read at the end
    offset: that read returns 0 at once."""
    wc = os.open(P + "wakeup_count", os.O_RDWR | os.O_CLOEXEC)
    state = os.open(P + "state", os.O_RDWR | os.O_CLOEXEC)
    res = {"size": os.fstat(wc).st_size}
    os.lseek(wc, 0, os.SEEK_SET)
    t0 = mono()
    first = sys_read(wc, 4096)
    res["first"] = [first, round(mono() - t0, 4)]
    res["lock"] = in_other_process(lock, b"SensorService_wakelock")
    reads = []
    for _ in range(2):          # the end offset, twice
        t0 = mono()
        reads.append([attempt(sys_read, wc, 4096), round(mono() - t0, 4)])
    res["at_end"] = reads
    res["writeback_with_lock"] = write(wc, first.strip())
    res["unlock"] = in_other_process(unlock, b"SensorService_wakelock")
    c, reads = read_count(wc, "readfdtostring")
    res["next"] = {"count": c, "reads": reads, "writeback": write(wc, c),
                   "mem": write(state, b"mem")}
    return res


@scenario
def eof():
    return {"init": boot(), "client": as_system_server(eof_client)}


def early_suspend_autosleep_client():
    res = {}
    # autosuspend_earlysuspend_init(): open state O_RDWR, write "on".
    fd = os.open(P + "state", os.O_RDWR | os.O_CLOEXEC)
    res["on"] = write(fd, b"on")
    os.close(fd)
    # The early-suspend framebuffer files must be absent.
    res["wait_for_fb"] = [attempt(lambda p: os.stat(p) and "exists", P + f)
                          for f in ("wait_for_fb_sleep", "wait_for_fb_wake")]
    # autosuspend_autosleep_init(): open autosleep O_WRONLY, kept.
    au = os.open(P + "autosleep", os.O_WRONLY | os.O_CLOEXEC)
    res["off0"] = write(au, b"off")                 # autosuspend_disable()
    s0 = stat_counter("success")
    res["mem"] = write(au, b"mem")                  # autosuspend_enable()
    res["autosleep_on"] = read_once(P + "autosleep")
    t0 = mono()
    while stat_counter("success") < s0 + 2 and mono() - t0 < 3:
        time.sleep(0.02)
    res["success_grew"] = [s0, stat_counter("success"), round(mono() - t0, 3)]
    # While autosleep is on, the suspend loop's files are busy.
    wc = os.open(P + "wakeup_count", os.O_RDWR | os.O_CLOEXEC)
    res["wakeup_count_write"] = write(wc, b"0")
    os.close(wc)
    st = os.open(P + "state", os.O_RDWR | os.O_CLOEXEC)
    res["state_write"] = write(st, b"mem")
    os.close(st)
    # A wake lock stops the loop.  Another autosleep write waits for the
    # transition lock: once it returns, a suspend that was in progress
    # when the lock came has ended and counted.
    res["lock"] = in_other_process(lock, b"PowerManagerService.Display")
    res["mem_again"] = write(au, b"mem")
    s1 = stat_counter("success")
    time.sleep(0.3)     # no suspend in a window of 0.3 s
    res["success_with_lock"] = [s1, stat_counter("success")]
    res["unlock"] = in_other_process(unlock, b"PowerManagerService.Display")
    t0 = mono()
    res["off"] = write(au, b"off")
    res["off_seconds"] = round(mono() - t0, 3)
    res["autosleep_off"] = read_once(P + "autosleep")
    res["pos"] = fd_pos(au)
    os.close(au)
    return res


@scenario
def early_suspend_autosleep():
    return {"init": boot(),
            "client": as_system_server(early_suspend_autosleep_client)}


@service
def systemsuspend10():
    """Android 10 SystemSuspend (user system, group system wakelock,
    capabilities BLOCK_SUSPEND): every wake lock of the platform is a
    write of its name to wake_lock, its release a write to wake_unlock,
    on fds kept open O_RDWR|O_CLOEXEC."""
    lk = os.open(P + "wake_lock", os.O_RDWR | os.O_CLOEXEC)
    ul = os.open(P + "wake_unlock", os.O_RDWR | os.O_CLOEXEC)
    res = {"caps": caps_of_self()}
    res["acquire"] = [write(lk, n) for n in NAMES]
    res["acquire_again"] = write(lk, NAMES[0])
    res["listing"] = read_once(P + "wake_lock")
    res["release"] = [write(ul, n) for n in NAMES]
    res["release_again"] = write(ul, NAMES[0])
    res["listing_after"] = read_once(P + "wake_lock")
    res["unlisting"] = read_once(P + "wake_unlock")
    res["pos"] = [fd_pos(lk), fd_pos(ul)]
    return res


@scenario
def android10():
    return {"init": boot(),
            "service": start_service("systemsuspend10", uid=AID_SYSTEM,
                                     groups=[AID_WAKELOCK])}


def debugfs_is_private():
    """True if /sys/kernel/debug is the tmpfs powerfs-container put there."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == "/sys/kernel/debug":
                sep = fields.index("-")
                return fields[sep + 1] == "tmpfs"
    return False


def batterystats_client(hold_ms):
    """PowerManagerService & co take locks; BatteryStats'
    KernelWakelockReader then opens /d/wakeup_sources and does one read
    of an 8 KiB buffer."""
    res = {}
    res["locks"] = lock(b"PowerManagerService.WakeLocks")
    time.sleep(int(hold_ms) / 1000)
    res["locks"] += unlock(b"PowerManagerService.WakeLocks")
    res["locks"] += lock_unlock(b"a") + lock_unlock(b"a")
    res["locks"] += lock_unlock(NAMES[8])
    res["locks"] += lock(b"*alarm*")
    fd = os.open("/sys/kernel/debug/wakeup_sources", os.O_RDONLY | os.O_CLOEXEC)
    res["data"] = sys_read(fd, 8192)
    os.close(fd)
    res["locks"] += unlock(b"*alarm*")
    return res


@scenario
def batterystats(hold_ms="60"):
    res = {"init": boot()}
    # init.rc: chmod 0755 /sys/kernel/debug, on a tmpfs of this mount
    # namespace's own.  A debugfs of the host's (systemd mounts one, mode
    # 0700) is not touched: a tmpfs is laid over it here, holding a bind of
    # powerfs's wakeup_sources, and taken away after.
    overlay = not debugfs_is_private()
    if overlay:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700",
                        "powerfs-debug", "/sys/kernel/debug"], check=True)
        open("/sys/kernel/debug/wakeup_sources", "w").close()
        subprocess.run(["mount", "--bind",
                        os.environ["POWERFS_CONTAINER_MOUNT"] + "/wakeup_sources",
                        "/sys/kernel/debug/wakeup_sources"], check=True)
    os.chmod("/sys/kernel/debug", 0o755)
    try:
        res["client"] = as_system_server(batterystats_client, hold_ms)
    finally:
        if overlay:
            subprocess.run(["umount", "-l", "/sys/kernel/debug"])
    return res


@service
def systemsuspend11(class_dir):
    """Android 11+ SystemSuspend: one suspend cycle, then the statistics:
    suspend_stats/* via openat on the directory fd and ReadFdToString;
    /sys/class/wakeup/*/ the same way (getKernelWakelockStats)."""
    res = {"caps": caps_of_self()}
    res["locks"] = lock_unlock(b"PowerManagerService.WakeLocks")
    loop = SuspendLoop("systemsuspend")
    res["cycle"] = loop.cycle()
    res["locks"] += lock(b"*alarm*")
    time.sleep(0.05)

    sfd = os.open(P + "suspend_stats", os.O_DIRECTORY | os.O_RDONLY
                  | os.O_CLOEXEC)
    res["suspend_stats"] = {}
    for name in os.listdir(sfd):
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=sfd)
        res["suspend_stats"][name] = read_fd_to_string(fd)
        os.close(fd)
    os.close(sfd)

    cfd = os.open(class_dir, os.O_DIRECTORY | os.O_RDONLY | os.O_CLOEXEC)
    wakeup = {}
    for d in os.listdir(cfd):
        dfd = os.open(d, os.O_DIRECTORY | os.O_RDONLY | os.O_CLOEXEC,
                      dir_fd=cfd)
        entry = {}
        for stat_name in os.listdir(dfd):
            fd = os.open(stat_name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dfd)
            entry[stat_name] = attempt(read_fd_to_string, fd)
            os.close(fd)
        os.close(dfd)
        wakeup[d] = entry
    os.close(cfd)
    res["class_wakeup"] = wakeup
    res["locks"] += unlock(b"*alarm*")
    return res


@scenario
def android11(private_class_dir=""):
    """private_class_dir: the host has no /sys/class/wakeup to bind over,
    so powerfs was given --class-wakeup=DIR: show DIR at /sys/class/wakeup
    (a tmpfs over /sys/class, in this mount namespace only)."""
    res = {"init": boot()}
    if private_class_dir:
        t0 = mono()
        while not os.path.ismount(private_class_dir) and mono() - t0 < 5:
            time.sleep(0.01)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755",
                        "android-class", "/sys/class"], check=True)
        os.mkdir("/sys/class/wakeup")
        subprocess.run(["mount", "--bind", private_class_dir,
                        "/sys/class/wakeup"], check=True)
    res["service"] = start_service("systemsuspend11", "/sys/class/wakeup",
                                   uid=AID_SYSTEM, groups=[AID_WAKELOCK])
    return res


# --- Android 12 and 13: SystemSuspend as it runs there ----------------------------

K = os.environ.get("CLIENT_WAKEUP_REASONS",
                   "/sys/kernel/wakeup_reasons").rstrip("/") + "/"


class SystemSuspend:
    """system/hardware/interfaces suspend/1.0/default (Android 12, 13): what
    it does with the kernel's files, call for call.  Every file is opened
    once at start and kept; the autosuspend thread reads wakeup_count,
    waits for the suspend counter, writes the count back and "mem" to
    state under one mutex, then reads both wakeup_reasons files (lseek(0),
    ReadFdToString).  Whatever the real service would log at ERROR goes to
    self.errors, with its message."""

    BASE_SLEEP = 0.1            # kDefaultBaseSleepTimeMillis
    MAX_SLEEP = 60.0

    def __init__(self, use_suspend_counter):
        self.errors, self.cycles = [], []
        self.use_counter = use_suspend_counter
        self.fds = {}
        for path, flags in ((P + "wakeup_count", os.O_RDWR),
                            (P + "state", os.O_RDWR),
                            (CLASS_WAKEUP, os.O_DIRECTORY),
                            (P + "suspend_stats", os.O_DIRECTORY),
                            (K + "last_resume_reason", os.O_RDONLY),
                            (K + "last_suspend_time", os.O_RDONLY)):
            self.fds[path] = self._open(path, flags | os.O_CLOEXEC)
        if not use_suspend_counter:
            self.fds[P + "wake_lock"] = self._open(P + "wake_lock",
                                                   os.O_RDWR | os.O_CLOEXEC)
        self.fds[P + "wake_unlock"] = self._open(P + "wake_unlock",
                                                 os.O_RDWR | os.O_CLOEXEC)
        self.counter = 0
        self.mutex = threading.Lock()
        self.cond = threading.Condition(self.mutex)
        self.enabled = False
        self.sleep_time = self.BASE_SLEEP
        self.after_writeback = None     # a test's hook, called once
        self.thread = None

    def _open(self, path, flags):
        try:
            return os.open(path, flags)
        except OSError as e:
            self.errors.append(f"error opening {path}: {ename(e.errno)}")
            return -1

    def _write(self, path, data, what):
        """WriteStringToFd: True, or False with errno (PLOG)."""
        r = write(self.fds[path], data)
        if r != len(data):
            if what:
                self.errors.append(f"error writing {data!r} to {path}: {r}")
            return False
        return True

    # The wake lock API (acquireWakeLock / WakeLock::release).
    def acquire(self, name):
        with self.mutex:
            if self.use_counter:
                self.counter += 1
            else:
                self._write(P + "wake_lock", name, "acquire")

    def release(self, name):
        with self.mutex:
            if self.use_counter:
                self.counter -= 1
                if self.counter == 0:
                    self.cond.notify_all()
            else:
                self._write(P + "wake_unlock", name, "release")

    def enable_autosuspend(self):
        with self.mutex:
            self._write(P + "wake_unlock", b"zygote_kwl", "enable")
            self.enabled = True
        self.thread = threading.Thread(target=self._autosuspend, daemon=True)
        self.thread.start()

    def disable_autosuspend(self):
        with self.mutex:
            self.enabled = False
            self.cond.notify_all()
        self.thread.join(30)
        assert not self.thread.is_alive(), "autosuspend thread hangs"

    def _autosuspend(self):
        should_sleep = True
        self.mutex.acquire()
        while self.enabled:
            if should_sleep:
                self.cond.wait_for(lambda: not self.enabled, self.sleep_time)
            if not self.enabled:
                break
            self.mutex.release()
            wc = self.fds[P + "wakeup_count"]
            os.lseek(wc, 0, os.SEEK_SET)
            count = attempt(retry_read, wc, 8192)        # readFd(): BUFSIZ
            self.mutex.acquire()
            if not isinstance(count, bytes) or not count:
                self.errors.append(f"error reading wakeup_count: {count}")
                continue
            should_sleep = False
            self.cond.wait_for(lambda: self.counter == 0 or not self.enabled)
            if not self.enabled:
                break
            # Held from here to the state write.
            if not self._write(P + "wakeup_count", count, None):
                continue
            if self.after_writeback:
                hook, self.after_writeback = self.after_writeback, None
                hook()
            success = self._write(P + "state", b"mem", None)
            should_sleep = True
            self.mutex.release()
            overhead, slept = self._suspend_time()
            self._update_sleep_time(success)
            reasons = self._wakeup_reasons()
            self.cycles.append({"success": success, "count": count,
                                "overhead": overhead, "slept": slept,
                                "reasons": reasons})
            self.mutex.acquire()
        self.mutex.release()

    def _read_kept(self, path):
        fd = self.fds[path]
        os.lseek(fd, 0, os.SEEK_SET)
        return attempt(read_fd_to_string, fd)

    def _suspend_time(self):
        content = self._read_kept(K + "last_suspend_time")
        if not isinstance(content, bytes):
            self.errors.append(f"failed to read suspend time: {content}")
            return 0.0, 0.0
        try:
            overhead, slept = (float(x) for x in content.split()[:2])
        except ValueError:
            self.errors.append(f"failed to parse suspend time {content!r}")
            return 0.0, 0.0
        return overhead, slept

    def _update_sleep_time(self, success):
        # Failed suspends back off (kFailedSuspendBackoffEnabled).
        self.sleep_time = self.BASE_SLEEP if success else \
            min(self.sleep_time * 2, self.MAX_SLEEP)

    def _wakeup_reasons(self):
        path = K + "last_resume_reason"
        content = self._read_kept(path)
        if not isinstance(content, bytes) or not content:
            self.errors.append(f"failed to read wakeup reasons: {content!r}")
            reasons = ["unknown"]
        else:
            reasons = [line.strip().decode("latin-1")
                       for line in content.split(b"\n") if line.strip()]
            reasons = reasons or ["unknown"]
        if reasons == ["unknown"]:
            # Re-open through /proc/self/fd, the kept fd's own path.
            old = self.fds[path]
            new = self._open(f"/proc/self/fd/{old}",
                             os.O_RDONLY | os.O_CLOEXEC)
            os.close(old)
            self.fds[path] = new
        return reasons

    def suspend_stats(self):
        """getSuspendStats(): readdir of the kept directory fd, openat,
        ReadFdToString, newlines removed, std::stoi but for two."""
        stats, d = {}, self.fds[P + "suspend_stats"]
        for name in os.listdir(d):
            fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=d)
            val = read_fd_to_string(fd).replace(b"\n", b"")
            os.close(fd)
            if name in ("last_failed_dev", "last_failed_step"):
                stats[name] = val.decode("latin-1")
            elif not re.fullmatch(rb"\s*[-+]?[0-9]+.*", val):
                self.errors.append(f"std::stoi throws on {name}: {val!r}")
            else:
                stats[name] = int(re.match(rb"\s*([-+]?[0-9]+)", val)[1])
        return stats

    def kernel_wakelocks(self):
        """WakeLockEntryList::getKernelWakelockStats(): every wakeupN of
        the kept /sys/class/wakeup fd; std::stoll of all but name."""
        out, d = {}, self.fds[CLASS_WAKEUP]
        for kwl in os.listdir(d):
            sd = os.open(kwl, os.O_DIRECTORY | os.O_RDONLY | os.O_CLOEXEC,
                         dir_fd=d)
            entry = {}
            for stat_name in os.listdir(sd):
                fd = os.open(stat_name, os.O_RDONLY | os.O_CLOEXEC,
                             dir_fd=sd)
                val = read_fd_to_string(fd).replace(b"\n", b"")
                os.close(fd)
                if stat_name == "name":
                    entry["name"] = val.decode("latin-1")
                elif not re.fullmatch(rb"[-+]?[0-9]+", val):
                    self.errors.append(f"std::stoll throws on {kwl}/"
                                       f"{stat_name}: {val!r}")
                else:
                    entry[stat_name] = int(val)
            os.close(sd)
            out[entry.get("name", kwl)] = entry
        return out

    def fd_paths(self):
        """What /proc/self/fd says of each kept fd."""
        return {path: os.readlink(f"/proc/self/fd/{fd}")
                for path, fd in self.fds.items() if fd >= 0}


@service
def systemsuspend13(era, cycles):
    """era "counter": useSuspendCounter (Android 13's default: only
    zygote_kwl reaches the kernel); "kernel": every wake lock is written to
    wake_lock and wake_unlock.  Runs until `cycles` attempts succeeded, one
    handshake lost to another process's late lock among them, with the
    platform taking and dropping wake locks meanwhile."""
    ss = SystemSuspend(era == "counter")
    res = {"caps": caps_of_self()}
    ss.acquire(b"PowerManagerService.Booting")
    ss.enable_autosuspend()
    time.sleep(0.3)
    res["cycles_while_held"] = len(ss.cycles)
    ss.release(b"PowerManagerService.Booting")

    def wait_cycles(n, timeout=20.0):
        t0 = mono()
        while len(ss.cycles) < n and mono() - t0 < timeout:
            time.sleep(0.02)
        return len(ss.cycles) >= n

    res["first"] = wait_cycles(1)
    # The platform's locks come and go between attempts.
    for name in (b"*alarm*", b"PowerManagerService.Display"):
        ss.acquire(name)
        time.sleep(0.05)
        ss.release(name)
    # A handshake lost: rild's lock lands between the write-back and the
    # state write (SystemSuspend holds its mutex there, so only a lock
    # from outside it can).
    lost = {}

    def late_lock():
        # Another process (a kernel wake lock of its own, as rild's).
        lost["lock"] = in_other_process(lock, b"radio-interface")
    ss.after_writeback = late_lock
    n = len(ss.cycles)
    res["lost"] = wait_cycles(n + 1)
    time.sleep(0.2)
    lost["unlock"] = in_other_process(unlock, b"radio-interface")
    res["late_lock"] = lost
    res["done"] = wait_cycles(n + 1 + int(cycles))
    ss.disable_autosuspend()
    res["cycles"] = ss.cycles
    res["suspend_stats"] = ss.suspend_stats()
    res["kernel_wakelocks"] = ss.kernel_wakelocks()
    res["fd_paths"] = ss.fd_paths()
    res["errors"] = ss.errors
    return res


@scenario
def android13(era, cycles="2"):
    """init's /sys/power lines (zygote_kwl taken), then SystemSuspend."""
    res = {"init": android_init()}
    res["service"] = start_service("systemsuspend13", era, cycles,
                                   uid=AID_SYSTEM,
                                   groups=[AID_SYSTEM, AID_WAKELOCK],
                                   timeout=45)
    return res


CLOCK_BOOTTIME_ALARM = 9           # linux/time.h


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


TFD_TIMER_ABSTIME = 1


def boottime():
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def alarm_owner(work, seconds):
    """AlarmManager's part, in a process of its own: a timerfd on
    CLOCK_BOOTTIME_ALARM due `seconds` from now (absolute, as AlarmManager
    sets it), waited for with select(); WORK/alarm gets when it was due and
    when the wait returned, on the boot clock."""
    fd = libc.timerfd_create(CLOCK_BOOTTIME_ALARM, 0)
    _check(0 if fd >= 0 else -1, "timerfd_create(CLOCK_BOOTTIME_ALARM)")
    due = boottime() + seconds
    spec = _Itimerspec(_Timespec(0, 0),
                       _Timespec(int(due), int(due % 1 * 1e9)))
    _check(libc.timerfd_settime(fd, TFD_TIMER_ABSTIME, ctypes.byref(spec),
                                None), "timerfd_settime")
    with open(work + "/alarm.tmp", "w") as f:
        f.write(json.dumps({"due": due}))
    os.rename(work + "/alarm.tmp", work + "/alarm.armed")
    select.select([fd], [], [])
    fired = boottime()
    expirations = int.from_bytes(os.read(fd, 8), "little")
    with open(work + "/alarm.tmp", "w") as f:
        f.write(json.dumps({"due": due, "fired": fired,
                            "expirations": expirations}))
    os.rename(work + "/alarm.tmp", work + "/alarm")


def counter(work):
    """An app at work: counts in a loop, the count in WORK/count."""
    fd = os.open(work + "/count", os.O_WRONLY | os.O_CREAT, 0o644)
    n = 0
    while True:
        n += 1
        os.pwrite(fd, b"%020d" % n, 0)
        time.sleep(0.001)


def forked(fn, *args):
    pid = os.fork()
    if pid == 0:
        try:
            fn(*args)
        finally:
            os._exit(0)
    return pid


@scenario
def container_sleep(work, alarm_s="2"):
    """Android in a container that sleeps on its own (powerfs
    --backend=freeze): SystemSuspend's loop (Android 13's suspend counter;
    zygote_kwl taken as init takes it, then released) puts the container
    to sleep whenever nothing holds it awake; a process counts in a loop;
    another waits for its CLOCK_BOOTTIME_ALARM timerfd, due alarm_s seconds
    from the start.  Prints "ready", runs until WORK/stop exists, prints
    "stopping" once the loop will not sleep again (it may be waiting for a
    wake lock to go), then the result."""
    pids = [forked(counter, work),
            forked(alarm_owner, work, float(alarm_s))]
    # Armed before the platform lets the device sleep.
    t0 = mono()
    while not os.path.exists(work + "/alarm.armed") and mono() - t0 < 10:
        time.sleep(0.005)
    res = {"zygote_kwl": lock(b"zygote_kwl")}
    ss = SystemSuspend(True)
    ss.enable_autosuspend()
    print("ready", flush=True)
    while not os.path.exists(work + "/stop"):
        time.sleep(0.02)
    with ss.mutex:
        ss.enabled = False
        ss.cond.notify_all()
    print("stopping", flush=True)
    ss.thread.join(30)
    res["thread_ended"] = not ss.thread.is_alive()
    for pid in pids:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    res["cycles"] = ss.cycles
    res["suspend_stats"] = ss.suspend_stats()
    res["errors"] = ss.errors
    return res


@scenario
def blocked_reader(path):
    """A suspend thread blocked in its wakeup_count read, retrying on EINTR
    (TEMP_FAILURE_RETRY).  Prints "ready", then the result."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    os.lseek(fd, 0, os.SEEK_SET)
    print("ready", flush=True)
    eintr = []
    t0 = mono()
    data = retry_read(fd, 1024, eintr)
    return {"data": data, "eintr": len(eintr), "seconds": round(mono() - t0, 3)}


def main():
    if sys.argv[1] == "service":
        try:
            res = {"ok": out(SERVICES[sys.argv[2]](*sys.argv[3:]))}
        except BaseException:      # noqa: B036 - reported to the parent
            res = {"exception": traceback.format_exc()}
        print(json.dumps(res), flush=True)
        return
    res = SCENARIOS[sys.argv[1]](*sys.argv[2:])
    print(json.dumps(out(res)), flush=True)


if __name__ == "__main__":
    main()
