#!/bin/sh
# Runs in the guest as root, from vmtest-boot.service (built into the image by
# scripts/vm/build-image), with the second disk mounted on /vmtest.  Sets up
# what the checks need and starts them; powers the guest off at the end.
set -u
install -m 0755 /vmtest/powerfs /usr/local/bin/powerfs
# The project's files and its ./powerfs, for the pytest modules: a writable
# copy (pytest and the tests write beside them).
rm -rf /root/powerfs && cp -a /vmtest/tree /root/powerfs
mkdir -p /run/vmtest/logs /usr/lib/systemd/system-sleep

# uid 1000, the "other user" of checks d and e.
grep -q '^tester:' /etc/passwd || {
	echo 'tester:x:1000:1000:check-vm tester:/tmp:/bin/sh' >> /etc/passwd
	echo 'tester:x:1000:' >> /etc/group
	echo 'tester:!:19000::::::' >> /etc/shadow
}
# tester has no session, so polkit's allow_any applies: grant what an active
# desktop user has (allow_active) for suspending and for taking a block
# inhibitor, so that a refusal comes from an inhibitor, not from polkit.  Not
# ...-ignore-inhibit: tester may not override others' inhibitors.
mkdir -p /etc/polkit-1/rules.d
cat > /etc/polkit-1/rules.d/50-vmtest.rules <<'RULES'
polkit.addRule(function(action, subject) {
	if (subject.user == "tester" &&
	    (action.id == "org.freedesktop.login1.suspend" ||
	     action.id == "org.freedesktop.login1.inhibit-block-sleep"))
		return polkit.Result.YES;
});
RULES
# Every sleep that systemd-sleep performs: arm the RTC (deep), tell the host,
# and run the per-check post-resume action if a check left one.
install -m 0755 /vmtest/sleep-hook /usr/lib/systemd/system-sleep/vmtest

# Kernel messages that the host watches on the console ("PM: suspend-to-idle"
# is a debug message), and a keyboard that may wake the guest from s2idle.
echo 1 > /sys/power/pm_debug_messages
echo 8 > /proc/sys/kernel/printk
echo enabled > /sys/bus/serio/devices/serio0/power/wakeup

{ uname -a; systemctl --version | head -1; cat /sys/power/state /sys/power/mem_sleep
  findmnt -no TARGET,OPTIONS /run; } > /run/vmtest/logs/env.txt 2>&1
/usr/bin/python3 /vmtest/checks.py
rc=$?
# Logs back to the host: a tar archive written onto the third disk.
journalctl -b --no-pager -o short-monotonic > /run/vmtest/logs/journal.txt 2>&1
dmesg > /run/vmtest/logs/dmesg.txt 2>&1
tar -C /run/vmtest -cf /dev/vdc logs
sync
echo "boot.sh: checks.py exited $rc, powering off"
systemctl poweroff
