"""make install and the systemd unit's readiness protocol."""

import os
import socket
import subprocess

import conftest


def test_make_install_puts_binaries_man_pages_and_unit(tmp_path):
    dest = tmp_path / "stage"
    r = subprocess.run(["make", "-C", str(conftest.REPO), "install",
                        "PREFIX=/opt/pf", f"DESTDIR={dest}"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    binary = dest / "opt/pf/bin/powerfs"
    assert os.access(binary, os.X_OK)
    assert os.access(dest / "opt/pf/bin/powerfs-report", os.X_OK)
    # One page per audience, each where man looks for its section.
    for page in ("powerfs.1", "powerfs-report.1", "powerfs.5", "powerfs.7"):
        installed = dest / "opt/pf/share/man" / ("man" + page[-1]) / page
        assert installed.read_text() == (conftest.REPO / page).read_text()
    assert sorted(p.name for p in (dest / "opt/pf/share/man").glob("*/*")) == \
        sorted(p.name for p in conftest.REPO.glob("*.[157]")), \
        "a man page in the tree that make install leaves out"
    unit = (dest / "lib/systemd/system/powerfs.service").read_text()
    lines = unit.splitlines()
    for line in ["Type=notify", "NotifyAccess=main",
                 "ExecStart=/opt/pf/bin/powerfs -f --backend=logind "
                 "-o allow_other --state-file=/var/lib/powerfs/state "
                 "/run/power",
                 "ExecReload=/bin/kill -HUP $MAINPID", "KillMode=mixed",
                 "StateDirectory=powerfs", "FileDescriptorStoreMax=4",
                 "Restart=on-failure"]:
        assert line in lines, line
    # Nothing may unmount a mount the fd store keeps alive for a restart.
    assert "fusermount3" not in unit
    assert subprocess.run([str(binary), "--version"], capture_output=True,
                          text=True).stdout.startswith("powerfs ")


def test_ready_is_notified_once_the_mount_is_live(tmp_path, monkeypatch):
    """Type=notify: READY=1 arrives on $NOTIFY_SOCKET, and by then the
    mount answers."""
    sock_path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(10)
    monkeypatch.setenv("NOTIFY_SOCKET", sock_path)
    pfs = conftest.Powerfs()
    pfs.start()
    try:
        # First the connection goes to the fd store (with its
        # descriptors), then READY=1 from the keeper, the main pid.
        stored = {}
        while True:
            msg, fds, _, _ = socket.recv_fds(sock, 4096, 4)
            fields = msg.decode().split("\n")
            if "FDSTORE=1" in fields:
                name = [f for f in fields if f.startswith("FDNAME=")]
                assert len(name) == 1 and len(fds) == 1, (fields, fds)
                stored[name[0][len("FDNAME="):]] = os.fstat(fds[0])
                for fd in fds:
                    os.close(fd)
                continue
            assert not fds
            break
        assert sorted(stored) == ["powerfs-fuse", "powerfs-session"]
        assert os.major(stored["powerfs-fuse"].st_rdev) == 10  # /dev/fuse
        assert os.minor(stored["powerfs-fuse"].st_rdev) == 229
        assert "READY=1" in fields
        assert f"MAINPID={pfs.proc.pid}" in fields
        assert f"STATUS=serving {pfs.mnt}" in fields
        assert pfs.read("wake_lock") == b"\n"
    finally:
        pfs.stop()
        sock.close()
