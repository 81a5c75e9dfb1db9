"""make install and the systemd unit's readiness protocol."""

import os
import socket
import subprocess

import conftest


def test_make_install_puts_binary_man_page_and_unit(tmp_path):
    dest = tmp_path / "stage"
    r = subprocess.run(["make", "-C", str(conftest.REPO), "install",
                        "PREFIX=/opt/pf", f"DESTDIR={dest}"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    binary = dest / "opt/pf/bin/powerfs"
    assert os.access(binary, os.X_OK)
    assert (dest / "opt/pf/share/man/man1/powerfs.1").read_text() == \
        (conftest.REPO / "powerfs.1").read_text()
    unit = (dest / "lib/systemd/system/powerfs.service").read_text()
    assert "Type=notify" in unit
    assert "ExecStart=/opt/pf/bin/powerfs -f --backend=logind -o allow_other " \
        "/run/power" in unit
    assert "Restart=on-failure" in unit
    assert "ExecStartPre=-/usr/bin/fusermount3 -uz /run/power" in unit
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
        msg = sock.recv(4096).decode()
        assert "READY=1" in msg.split("\n")
        assert f"STATUS=serving {pfs.mnt}" in msg
        assert pfs.read("wake_lock") == b"\n"
    finally:
        pfs.stop()
        sock.close()
