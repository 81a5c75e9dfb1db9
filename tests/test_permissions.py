"""Permissions (SPEC.md): CAP_BLOCK_SUSPEND for wake_lock/wake_unlock,
chown/chmod by root and their enforcement, allow_other."""

import errno
import os
import stat

import pytest

from conftest import (CAP_BLOCK_SUSPEND, ChildSetupError, effective_caps,
                      open_close, open_read_close, open_write_close,
                      raises_errno, run_in_child, set_effective_cap,
                      unshare_as_root)

CAP_SYS_ADMIN = 21
USER = dict(uid=1000, gid=1000, groups=[])
NOBODY = dict(uid=65534, gid=65534, groups=[])


def write_as(p, name, data, **who):
    return run_in_child(open_write_close, p.path(name), data, **who)


def holding_cap(fn, *args):
    """fn(*args) once this process is seen to hold CAP_BLOCK_SUSPEND (in its
    own user namespace)."""
    assert effective_caps() & (1 << CAP_BLOCK_SUSPEND), "no capability"
    return fn(*args)


# --- CAP_BLOCK_SUSPEND ------------------------------------------------------------

@pytest.mark.parametrize("data", [b"\n", b"capx", b"capx 100", b" "], ids=repr)
@pytest.mark.parametrize("name", ["wake_lock", "wake_unlock"])
def test_root_without_cap_block_suspend(pfs, name, data):
    before = list(pfs.sources())
    with raises_errno(errno.EPERM):
        write_as(pfs, name, data, drop_caps=[CAP_BLOCK_SUSPEND])
    assert list(pfs.sources()) == before
    assert pfs.read("wake_lock") == b"\n"


def test_root_with_the_capability(pfs):
    # Control: the child mechanism itself works, other caps do not matter.
    assert write_as(pfs, "wake_lock", b"capok") == 5
    assert write_as(pfs, "wake_unlock", b"capok",
                    drop_caps=[CAP_SYS_ADMIN]) == 5
    assert pfs.read("wake_lock") == b"\n"


def test_unlock_without_cap_leaves_the_lock(pfs):
    pfs.lock("capheld")
    try:
        with raises_errno(errno.EPERM):
            write_as(pfs, "wake_unlock", b"capheld",
                     drop_caps=[CAP_BLOCK_SUSPEND])
        assert pfs.read("wake_lock") == b"capheld\n"
    finally:
        pfs.unlock("capheld")


def writes_with_cap_switched(path, writes):
    """On one fd, each (data, on) of writes: the capability put into or
    taken out of this thread's effective set, then the write.  Returns each
    write's count or errno name."""
    out = []
    fd = os.open(path, os.O_WRONLY)
    try:
        for data, on in writes:
            set_effective_cap(CAP_BLOCK_SUSPEND, on)
            assert bool(effective_caps() & (1 << CAP_BLOCK_SUSPEND)) == on
            try:
                out.append(os.write(fd, data))
            except OSError as e:
                out.append(errno.errorcode[e.errno])
    finally:
        os.close(fd)
    return out


def test_capability_is_checked_at_each_write(pfs):
    # tests/oracle/cases/d1-cap-per-write.sh: the kernel checks the writing
    # thread's capability at every write, not at open (FINDINGS.md, D).
    # One thread, one fd: an answer remembered from its first write would
    # let the second through.
    switched = [(b"d1a", True), (b"d1b", False), (b"d1c", True)]
    assert run_in_child(writes_with_cap_switched, pfs.path("wake_lock"),
                        switched) == [3, "EPERM", 3]
    assert pfs.read("wake_lock") == b"d1a d1c\n"
    switched = [(b"d1a", True), (b"d1c", False), (b"d1c", True)]
    assert run_in_child(writes_with_cap_switched, pfs.path("wake_unlock"),
                        switched) == [3, "EPERM", 3]
    assert pfs.read("wake_lock") == b"\n"


def test_other_files_need_no_capability(pfs):
    n = pfs.count()
    assert write_as(pfs, "autosleep", b"off",
                    drop_caps=[CAP_BLOCK_SUSPEND]) == 3
    assert pfs.count() == n + 1
    with raises_errno(errno.EINVAL):
        write_as(pfs, "state", b"foo", drop_caps=[CAP_BLOCK_SUSPEND])


def test_no_capability_check_option(mount):
    p = mount("--no-capability-check")
    assert write_as(p, "wake_lock", b"nc", drop_caps=[CAP_BLOCK_SUSPEND]) == 2
    assert p.read("wake_lock") == b"nc\n"
    with raises_errno(errno.EINVAL):       # parsed now
        write_as(p, "wake_lock", b"\n", drop_caps=[CAP_BLOCK_SUSPEND])
    assert write_as(p, "wake_unlock", b"nc", drop_caps=[CAP_BLOCK_SUSPEND]) == 2
    assert p.read("wake_lock") == b"\n"


def test_non_root_without_caps_gets_eperm(mount):
    p = mount("-o", "allow_other")
    for name in ("wake_lock", "wake_unlock"):
        os.chmod(p.path(name), 0o666)
    for data in (b"\n", b"usr"):
        for name in ("wake_lock", "wake_unlock"):
            with raises_errno(errno.EPERM):
                write_as(p, name, data, **USER)
    assert p.read("wake_lock") == b"\n"
    assert p.read("wake_unlock") == b"\n"


def test_non_root_with_no_capability_check(mount):
    p = mount("-o", "allow_other", "--no-capability-check")
    for name in ("wake_lock", "wake_unlock"):
        os.chmod(p.path(name), 0o666)
    assert write_as(p, "wake_lock", b"usr", **USER) == 3
    assert p.read("wake_lock") == b"usr\n"
    assert write_as(p, "wake_unlock", b"usr", **USER) == 3
    assert p.read("wake_lock") == b"\n"


def test_capability_in_a_user_namespace(mount):
    """Deviation (SPEC.md): the capability in the writer's own user
    namespace counts only if root (or a trusted owner) made that namespace.
    uid 65534 gets EPERM, and EPERM again after unshare -Ur, holding every
    capability in its namespace; the root of a namespace that root made and
    mapped (a container) may lock."""
    p = mount("-o", "allow_other")
    for name in ("wake_lock", "wake_unlock"):
        os.chmod(p.path(name), 0o666)
    try:
        for name in ("wake_lock", "wake_unlock"):
            with raises_errno(errno.EPERM):
                write_as(p, name, b"userns", **NOBODY)
            with raises_errno(errno.EPERM):
                run_in_child(unshare_as_root, holding_cap, open_write_close,
                             p.path(name), b"userns", **NOBODY)
        assert p.read("wake_lock") == b"\n"
        assert p.read("wake_unlock") == b"\n"
        for name in ("wake_lock", "wake_unlock"):
            assert run_in_child(holding_cap, open_write_close, p.path(name),
                                b"userns", parent_map="0 100000 65536") == 6
    except ChildSetupError as e:
        pytest.skip(f"cannot create a user namespace: {e}")
    assert p.read("wake_unlock") == b"userns\n"


# --- chown / chmod ------------------------------------------------------------------------

def test_chmod_chown_by_root_persist(mount):
    p = mount()
    os.chmod(p.path("wake_lock"), 0o660)
    os.chown(p.path("wake_lock"), 1000, 1001)
    os.chmod(p.path("suspend_stats/success"), 0o400)
    os.chown(p.path("state"), 1002, 0)
    p.lock("x")
    p.unlock("x")
    st = os.stat(p.path("wake_lock"))
    assert stat.S_ISREG(st.st_mode)
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o660, 1000, 1001)
    assert st.st_size == 4096
    st = os.stat(p.path("suspend_stats/success"))
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o400, 0)
    st = os.stat(p.path("state"))
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o644, 1002, 0)
    # Others are untouched.
    st = os.stat(p.path("wake_unlock"))
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o644, 0, 0)
    # The content still works for root.
    assert p.read("suspend_stats/success") == b"0\n"
    assert p.write("wake_lock", b"y") == 1
    p.unlock("y")


WHO = {
    "owner": dict(uid=1000, gid=1000, groups=[]),
    "supplementary_group": dict(uid=2000, gid=2000, groups=[1001]),
    "primary_group": dict(uid=2000, gid=1001, groups=[]),
    "other": dict(uid=2000, gid=2000, groups=[]),
}


@pytest.mark.parametrize("who,can_read,can_write", [
    ("owner", True, True),
    ("supplementary_group", False, True),
    ("primary_group", False, True),
    ("other", False, False),
])
def test_modes_are_enforced_for_others(mount, who, can_read, can_write):
    p = mount("-o", "allow_other", "--no-capability-check")
    os.chown(p.path("wake_lock"), 1000, 1001)
    os.chmod(p.path("wake_lock"), 0o620)
    path = p.path("wake_lock")
    ids = WHO[who]
    if can_read:
        assert run_in_child(open_read_close, path, **ids) == b"\n"
    else:
        with raises_errno(errno.EACCES):
            run_in_child(open_close, path, os.O_RDONLY, **ids)
    if can_write:
        assert run_in_child(open_write_close, path, b"perm", **ids) == 4
        assert p.read("wake_lock") == b"perm\n"
        p.unlock("perm")
    else:
        with raises_errno(errno.EACCES):
            run_in_child(open_close, path, os.O_WRONLY, **ids)
    # Root is not bound by the mode.
    assert p.write("wake_lock", b"r") == 1
    p.unlock("r")


def test_default_modes_for_others(mount):
    p = mount("-o", "allow_other")
    for name in ("state", "wakeup_count", "wake_lock", "autosleep"):
        with raises_errno(errno.EACCES):
            run_in_child(open_close, p.path(name), os.O_WRONLY, **USER)
    assert run_in_child(open_read_close, p.path("state"), **USER) \
        == b"freeze mem disk\n"
    assert run_in_child(open_read_close, p.path("suspend_stats/fail"),
                        **USER) == b"0\n"
    assert run_in_child(open_read_close, p.path("wakeup_sources"), **USER)
    assert sorted(run_in_child(os.listdir, p.path("suspend_stats"), **USER))


def test_chmod_by_others_is_refused(mount):
    p = mount("-o", "allow_other")
    with raises_errno(errno.EPERM):
        run_in_child(os.chmod, p.path("wake_lock"), 0o666, **USER)
    with raises_errno(errno.EPERM):
        run_in_child(os.chown, p.path("wake_lock"), 1000, 1000, **USER)
    st = os.stat(p.path("wake_lock"))
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o644, 0)


@pytest.mark.parametrize("name", ["suspend_stats/success"])
def test_chmod_does_not_make_read_only_files_writable(mount, name):
    p = mount("-o", "allow_other")
    os.chmod(p.path(name), 0o666)
    assert stat.S_IMODE(os.stat(p.path(name)).st_mode) == 0o666
    with raises_errno(errno.EACCES):
        os.open(p.path(name), os.O_WRONLY)
    with raises_errno(errno.EACCES):
        run_in_child(open_close, p.path(name), os.O_WRONLY, **USER)


# --- allow_other ----------------------------------------------------------------------------

def test_without_allow_other_others_are_refused(mount):
    p = mount()
    with raises_errno(errno.EACCES):
        run_in_child(os.stat, p.path(), **USER)
    with raises_errno(errno.EACCES):
        run_in_child(open_read_close, p.path("state"), **USER)


def test_with_allow_other_others_can_look(mount):
    p = mount("-o", "allow_other")
    st = run_in_child(os.stat, p.path(), **USER)
    assert stat.S_ISDIR(st.st_mode)
    assert "wake_lock" in run_in_child(os.listdir, p.path(), **USER)
    assert run_in_child(open_read_close, p.path("wake_lock"), **USER) == b"\n"


def test_chmod_of_wakeup_sources_lets_others_open_it_for_nothing(mount):
    """debugfs: the mode decides who opens it; no write ever succeeds."""
    p = mount("-o", "allow_other")
    with raises_errno(errno.EACCES):
        run_in_child(open_close, p.path("wakeup_sources"), os.O_WRONLY, **USER)
    os.chmod(p.path("wakeup_sources"), 0o666)
    with raises_errno(errno.EINVAL):
        run_in_child(open_write_close, p.path("wakeup_sources"), b"x", **USER)
