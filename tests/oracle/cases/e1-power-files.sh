# E1: the rest of mainline's /sys/power (6.1 without hibernation): each file's mode,
# content, accepted and refused writes, and what a write changes.
. ${LIB:-/lib.sh}
note "listing and modes"
t "ls -1 $P"
for f in mem_sleep sync_on_suspend pm_async pm_print_times pm_debug_messages pm_freeze_timeout pm_test pm_wakeup_irq; do
	t "pfs st $P/$f"
	t "pfs cat $P/$f"
done
note "0/1 flags: every write on one fd, each followed by a read"
for f in sync_on_suspend pm_async pm_print_times pm_debug_messages; do
	t "pfs seq $P/$f rw wr:0 pread:64@0 wr:1 pread:64@0 wr:0\\\\n pread:64@0 wr:1\\\\n wr:2 wr:+1 wr:01 wr:-0 wr:' 1' wr:'1 ' wr:1\\\\n\\\\n wr:x wr:0x1 wr:10 wr:1\\\\0 wr: pread:64@0"
done
note "the written flag stays as written: sync_on_suspend 0, then 1 again"
t "pfs w $P/sync_on_suspend 0"
t "pfs cat $P/sync_on_suspend"
t "pfs w $P/sync_on_suspend 1"
note "pm_freeze_timeout"
t "pfs seq $P/pm_freeze_timeout rw wr:0 pread:64@0 wr:4294967295 pread:64@0 wr:4294967296 pread:64@0 wr:18446744073709551615 pread:64@0 wr:18446744073709551616 wr:-1 wr:12abc wr:' 5' wr:+7 pread:64@0 wr:5000\\\\n pread:64@0 wr:0x10 wr: pread:64@0"
t "pfs w $P/pm_freeze_timeout 20000"
note "pm_test"
t "pfs seq $P/pm_test rw wr:core pread:100@0 wr:devices\\\\n pread:100@0 wr:freezer\\\\njunk pread:100@0 wr:' core' wr:CORE wr:core\\\\0 wr:'none ' wr:foo wr:none pread:100@0"
note "mem_sleep"
t "pfs seq $P/mem_sleep rw wr:s2idle pread:100@0 wr:deep\\\\n pread:100@0 wr:shallow wr:mem wr:'deep ' wr:DEEP wr:deep\\\\0 wr:s2idle\\\\njunk pread:100@0 wr:deep"
note "mem_sleep while autosleep is on (a lock held, so nothing sleeps)"
t "pfs w $P/wake_lock e1"
t "pfs w $P/autosleep mem"
t "pfs seq $P/mem_sleep w wr:s2idle wr:foo"
t "pfs seq $P/pm_async w wr:0 wr:1"
t "pfs cat $P/mem_sleep"
t "pfs w $P/autosleep off"
t "pfs w $P/wake_unlock e1"
note "pm_wakeup_irq: read-only, ENODATA before any wakeup IRQ"
t "pfs o $P/pm_wakeup_irq w"
t "pfs o $P/pm_wakeup_irq rw"
t "pfs seq $P/pm_wakeup_irq r read:100 read:100"
note "uid 1000 (no capabilities) against the 0644 files"
t "pfs as 1000 1000 - - pfs o $P/sync_on_suspend w"
t "pfs as 1000 1000 - - pfs cat $P/mem_sleep"
note "a suspend changes pm_wakeup_irq? (freezer test level: no platform sleep)"
pmtest freezer 0
t "pfs w $P/state freeze"
t "pfs cat $P/pm_wakeup_irq"
pmtest none 0
