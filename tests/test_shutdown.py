"""Shutdown with clients inside requests: SIGTERM (SIGINT) while readers
are blocked in wakeup_count and a state write is pending.

The keeper passes SIGTERM/SIGINT to its server, which quits its loop and
answers every parked request (blocked reads EINTR, pending writes EIO);
then the keeper unmounts and exits 0.  (SIGHUP is a live upgrade, in which
clients see no error: test_keeper.py.)  Nobody may be left inside a request (a process
waiting for an answer that never comes sits in D state once it has been
signalled).

fusermount3 -u (not lazy) cannot succeed while a client holds a file of the
mount open: the kernel refuses with EBUSY, whatever the server does.  So a
client blocked in a request can only be released by a signal to the server;
that case is covered here by SIGTERM, and
test_fusermount_is_busy_while_a_client_is_blocked checks that the refused
unmount harms nothing.  An unmount with fusermount3 -u and no client is
what every fixture teardown in conftest.py does (exit status 0 required), so
it is not repeated here.

These tests start their own server (the mount disappears with it, so the
fixtures' teardown, which unmounts with fusermount3 -u, does not fit).
"""

import contextlib
import errno
import os
import shutil
import signal
import subprocess

import pytest

from conftest import (BAD_LOG_PATTERNS, EXIT_TIMEOUT, FUSERMOUNT, PYTHON,
                      Powerfs, Reader, _children, _live, timed,
                      wait_in_syscall, wait_until)

# --- a child process blocked in write(2) -----------------------------------------

_WRITER = r'''
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
libc.write.restype = ctypes.c_ssize_t
path, data = sys.argv[1], bytes.fromhex(sys.argv[2])
fd = os.open(path, os.O_WRONLY)
sys.stdout.write("ready\n"); sys.stdout.flush()
n = libc.write(fd, data, len(data))
e = ctypes.get_errno() if n < 0 else 0
sys.stdout.write(json.dumps({"n": n, "errno": e, "data": ""}) + "\n")
sys.stdout.flush()
'''

_WRITE_SYSCALLS = {"x86_64": ("1", "18"), "aarch64": ("64", "68")}


class Writer(Reader):
    """Like conftest's Reader, but the child does one write(2) of data
    through libc (so the errno is visible).  result() -> (n, errno, b"")."""

    def __init__(self, path, data):     # noqa: super().__init__ not wanted
        self.proc = subprocess.Popen(
            [PYTHON, "-c", _WRITER, path, data.hex()],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        _children.append(self.proc)
        self._buf = b""
        line = self._line(10.0)
        if line != b"ready":
            err = self.proc.stderr.read().decode(errors="replace") \
                if self.proc.poll() is not None else ""
            raise AssertionError(f"writer did not start: {line!r} {err}")
        self._result = None

    def wait_in_write(self, timeout=5.0):
        wait_in_syscall(self.proc, _WRITE_SYSCALLS, "write", timeout)


# A client that reads, gets EINTR when the server shuts down, and reads the
# same fd again when told to (after the server is gone): the retry must fail
# at once with the kernel's answer for a connection whose server closed
# /dev/fuse, not hang.  The retry is sent by the test, not left to the
# client's own timing, so there is exactly one right errno.
_RETRYING_READER = r'''
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.read.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
libc.read.restype = ctypes.c_ssize_t
fd = os.open(sys.argv[1], os.O_RDONLY)
sys.stdout.write("ready\n"); sys.stdout.flush()
buf = ctypes.create_string_buffer(8192)
for _ in range(2):
    n = libc.read(fd, buf, 8192)
    e = ctypes.get_errno() if n < 0 else 0
    data = buf.raw[:n].hex() if n > 0 else ""
    sys.stdout.write(json.dumps({"n": n, "errno": e, "data": data}) + "\n")
    sys.stdout.flush()
    sys.stdin.readline()
'''


class RetryingReader(Writer):
    def __init__(self, path):           # noqa: super().__init__ not wanted
        self.proc = subprocess.Popen(
            [PYTHON, "-c", _RETRYING_READER, path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        _children.append(self.proc)
        self._buf = b""
        line = self._line(10.0)
        assert line == b"ready", line
        self._result = None

    def retry(self, timeout=5.0):
        """Read the same fd again; (n, errno) of that read."""
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()
        self._result = None
        n, err, _ = self.result(timeout)
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.close()
        return n, err


# --- helpers -----------------------------------------------------------------------

def proc_state(pid):
    """The state letter of /proc/PID/stat, None once the process is gone
    (reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def assert_not_in_d_state(*clients):
    for c in clients:
        st = proc_state(c.proc.pid)
        assert st != "D", (f"pid {c.proc.pid} in D state "
                           "(uninterruptible, inside a request)")


def assert_exits(client, timeout=5.0):
    """The client process ends by itself (it printed its result and
    exits); one that does not is reported with its state."""
    try:
        rc = client.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"client pid {client.proc.pid} still there {timeout}s after "
            f"its request ended, state {proc_state(client.proc.pid)}") \
            from None
    assert rc == 0, f"client exited with {rc}: " + \
        client.proc.stderr.read().decode(errors="replace")


@contextlib.contextmanager
def server(*args):
    p = Powerfs(*args).start()
    try:
        yield p
    finally:
        _live.discard(p)
        for c in list(_children):
            if c.poll() is None:
                c.kill()
        p.force_cleanup()
        if not os.path.ismount(p.mnt):
            shutil.rmtree(p.tmpdir, ignore_errors=True)


def assert_exit_0_and_unmounted(p, timeout=EXIT_TIMEOUT):
    try:
        rc = p.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"powerfs still running {timeout}s after the "
                             f"signal; output:\n{p.log()[-3000:]}") from None
    assert rc == 0, f"exit status {rc}; output:\n{p.log()[-3000:]}"
    assert not os.path.ismount(p.mnt), "still mounted after exit"
    bad = [line for line in p.log().splitlines()
           if any(x in line for x in BAD_LOG_PATTERNS)]
    assert not bad, bad


def block_clients(p, readers=2):
    """A lock held, a state write pending (60 s simulated sleep) and
    readers blocked in wakeup_count.  (The readers come after the sleep
    began: where the kernel's freezer would strike, the readers waiting
    then get EINTR.)"""
    p.lock("held")
    w = Writer(p.path("state"), b"mem")
    w.wait_in_write()
    assert wait_until(lambda: "suspending to mem" in p.log(), timeout=5), \
        p.log()
    rs = [Reader(p.path("wakeup_count")) for _ in range(readers)]
    for r in rs:
        r.wait_in_read()
    for r in rs:
        assert r.blocked(0.1), f"wakeup_count read returned: {r.result()}"
    assert w.blocked(0.1), f"state write returned: {w.result()}"
    assert_not_in_d_state(w, *rs)
    return rs, w


def assert_released(rs, w):
    for r in rs:
        n, err, _ = r.result(5)
        assert (n, err) == (-1, errno.EINTR), \
            f"blocked reader: n={n} errno={errno.errorcode.get(err, err)}"
    n, err, _ = w.result(5)
    assert n == -1 and err != 0, f"pending state write returned {n}"
    assert err == errno.EIO, \
        f"pending state write: {errno.errorcode.get(err, err)}, expected EIO"
    for c in (*rs, w):
        assert_exits(c)


# --- the tests -----------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT],
                         ids=["SIGTERM", "SIGINT"])
def test_signal_releases_blocked_clients(sig):
    with server("--simulate-sleep-ms=60000") as p:
        rs, w = block_clients(p)
        os.kill(p.proc.pid, sig)
        assert_released(rs, w)
        assert_exit_0_and_unmounted(p)


def test_retrying_reader_gets_an_error_not_a_hang():
    """A client that reads again after EINTR, once the server is gone, finds
    the connection closed: ENOTCONN at once, no hang."""
    with server("--simulate-sleep-ms=60000") as p:
        p.lock("held")
        r = RetryingReader(p.path("wakeup_count"))
        r.wait_in_read()
        assert r.blocked(0.2)
        os.kill(p.proc.pid, signal.SIGTERM)
        n, err, _ = r.result(5)
        assert (n, err) == (-1, errno.EINTR), \
            f"parked read: n={n} errno={errno.errorcode.get(err, err)}"
        assert_exit_0_and_unmounted(p)
        # The server closed /dev/fuse: fuse_get_req answers ENOTCONN to
        # every new request on the connection.
        n, err = r.retry()
        assert (n, err) == (-1, errno.ENOTCONN), \
            f"retried read: n={n} errno={errno.errorcode.get(err, err)}"
        assert_exits(r)


def test_second_signal_during_shutdown():
    """SIGTERM then at once SIGINT (an impatient service manager): still
    exit 0, everyone released."""
    with server("--simulate-sleep-ms=60000") as p:
        rs, w = block_clients(p, readers=1)
        os.kill(p.proc.pid, signal.SIGTERM)
        os.kill(p.proc.pid, signal.SIGINT)
        assert_released(rs, w)
        assert_exit_0_and_unmounted(p)


def test_sigterm_during_an_autosleep_suspend():
    """Autosleep is in a (60 s simulated) suspend: SIGTERM ends it, exit 0."""
    with server("--simulate-sleep-ms=60000") as p:
        assert p.write("autosleep", b"mem") == 3
        assert wait_until(lambda: "suspending to mem" in p.log(), timeout=5), \
            p.log()
        os.kill(p.proc.pid, signal.SIGTERM)
        assert_exit_0_and_unmounted(p)


def test_fusermount_is_busy_while_a_client_is_blocked():
    """fusermount3 -u fails with EBUSY while clients hold files open (here:
    blocked in wakeup_count and state); that must change nothing: the clients
    stay blocked, the server keeps serving.  SIGTERM then releases them."""
    with server("--simulate-sleep-ms=60000") as p:
        rs, w = block_clients(p, readers=1)
        u = subprocess.run([FUSERMOUNT, "-u", p.mnt], capture_output=True,
                           timeout=10)
        assert u.returncode != 0, "fusermount3 -u succeeded with files open"
        assert b"busy" in u.stderr.lower(), u.stderr
        assert os.path.ismount(p.mnt)
        assert p.alive(), p.log()
        assert rs[0].blocked(0.2) and w.blocked(0.0)
        assert_not_in_d_state(w, *rs)
        assert timed(p.read, "state") == b"freeze mem disk\n"
        assert timed(p.read, "wake_lock") == b"held\n"
        os.kill(p.proc.pid, signal.SIGTERM)
        assert_released(rs, w)
        assert_exit_0_and_unmounted(p)
