"""systemd-nspawn with a powerfs mount bound over /sys/power.

A minimal busybox rootfs (conftest's rootfs fixture); no systemd
runs here, so nspawn is started with --register=no --keep-unit.  nspawn
drops CAP_BLOCK_SUSPEND from the container unless it is given
--capability=CAP_BLOCK_SUSPEND: without it the container's root cannot
take or release wake locks (EPERM), with it it can."""

import os
import re
import subprocess

import pytest

import conftest
from conftest import CAP_BLOCK_SUSPEND

SHARED_ARGS = ("-o", "allow_other")      # as a host would mount it
NSPAWN = conftest.NSPAWN
DD_STATUS = re.compile(rb"\d+\+\d+ records (in|out)\n|\d+ bytes .*copied.*\n")


def nspawn(rootfs, pfs, script, *opts):
    """Run script in a container whose /sys/power is pfs's mount; returns
    (status, stdout, stderr).  --console=pipe: no pseudo-terminal, so the
    container's stdout and stderr stay apart and byte-exact."""
    r = subprocess.run(
        [NSPAWN, "--quiet", "--register=no", "--keep-unit", "--console=pipe",
         "-D", rootfs,
         f"--machine=powerfs-test-{os.getpid()}",
         f"--bind={pfs.mnt}:/sys/power", *opts, "/bin/sh", "-c", script],
        capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    # nspawn complains when /run is not a tmpfs; that is not ours.
    err = b"".join(ln for ln in r.stderr.splitlines(keepends=True)
                   if b"Attempted to remove disk file system" not in ln)
    return r.returncode, r.stdout, err


def cap_eff(out):
    m = re.search(rb"CapEff:\s*([0-9a-f]+)", out)
    assert m, out
    return int(m.group(1), 16)


def test_bound_mount_is_sys_power(rootfs, pfs):
    rc, out, err = nspawn(rootfs, pfs, "dd if=/sys/power/state bs=8192 "
                          "count=1 2>/dev/null; grep ' /sys/power ' "
                          "/proc/self/mountinfo")
    assert (rc, err) == (0, b"")
    state, mountinfo = out.split(b"\n", 1)
    assert state + b"\n" == pfs.read("state") == b"freeze mem disk\n"
    assert b" - fuse.powerfs " in mountinfo


@pytest.mark.parametrize("name", ["wake_lock", "wake_unlock"])
def test_without_the_capability_writes_fail_with_eperm(rootfs, pfs, name):
    pfs.lock("nsp")
    try:
        rc, out, err = nspawn(rootfs, pfs, "grep CapEff /proc/self/status; "
                              f"echo nsp > /sys/power/{name}")
        assert not cap_eff(out) & (1 << CAP_BLOCK_SUSPEND)
        assert rc == 1
        assert err == b"sh: write error: Operation not permitted\n"
        assert pfs.read("wake_lock") == b"nsp\n"      # nothing changed
    finally:
        pfs.unlock("nsp")


def test_with_the_capability_wake_locks_work(rootfs, pfs):
    script = ("grep CapEff /proc/self/status; "
              "echo nsc > /sys/power/wake_lock && "
              "dd if=/sys/power/wake_lock bs=8192 count=1 && "
              "echo nsc > /sys/power/wake_unlock && "
              "dd if=/sys/power/wake_lock bs=8192 count=1")
    rc, out, err = nspawn(rootfs, pfs, script,
                          "--capability=CAP_BLOCK_SUSPEND")
    assert rc == 0, err
    assert DD_STATUS.sub(b"", err) == b""
    caps, reads = out.split(b"\n", 1)
    assert cap_eff(caps) & (1 << CAP_BLOCK_SUSPEND)
    assert reads == b"nsc\n\n"
    assert pfs.read("wake_lock") == b"\n"
    assert b"nsc" in pfs.inactive()
    assert pfs.source("nsc").active_count == 1
