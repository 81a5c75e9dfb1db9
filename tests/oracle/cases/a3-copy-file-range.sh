# A3: copy_file_range(2) (raw syscall, flags 0) from the files to tmpfs, between two files
# of the same filesystem (which writes!), across filesystems.
. ${LIB:-/lib.sh}
setup_locks
note "A3 copy_file_range. wake_lock: ab longer_lock_name; wake_unlock: unl"
note "---- to a tmpfs file ($T/cfr.out), NULL offset, explicit offset 2, count 0"
for f in $FILES; do
	t "pfs seq $f r cfr:65536:$T/cfr.out pos cfr:65536@2:$T/cfr.out cfr:0:$T/cfr.out"
done
drop_locks
t "pfs seq $P/wakeup_count r cfr:65536:$T/cfr.out pos"
setup_locks
note "---- same filesystem: wake_lock -> wake_unlock (would unlock the name written)"
t "pfs r $P/wake_lock; pfs r $P/wake_unlock"
t "pfs seq $P/wake_lock r cfr:65536:$P/wake_unlock pos"
t "pfs r $P/wake_lock; pfs r $P/wake_unlock"
echo longer_lock_name > $P/wake_unlock
note "only ab held now"
t "pfs seq $P/wake_lock r cfr:65536:$P/wake_unlock"
t "pfs r $P/wake_lock; pfs r $P/wake_unlock"
echo ab > $P/wake_lock
t "pfs seq $P/wake_lock r cfr:2@0:$P/wake_unlock"
t "pfs r $P/wake_lock; pfs r $P/wake_unlock"
note "wakeup_count -> wake_lock (would lock a lock named after the count)"
echo ab > $P/wake_unlock
t "pfs seq $P/wakeup_count r cfr:65536:$P/wake_lock"
t "pfs r $P/wake_lock"
note "state -> state (same file: overlapping ranges) and state -> autosleep"
t "pfs seq $P/state r cfr:4:$P/state"
t "pfs seq $P/state r cfr:6:$P/autosleep"
t "pfs r $P/autosleep"
t "echo off > $P/autosleep; pfs r $P/autosleep"
note "---- across filesystems: sysfs -> debugfs, debugfs -> sysfs, tmpfs -> sysfs"
t "pfs seq $P/wake_lock r cfr:65536:$WS"
t "pfs seq $WS r cfr:65536:$P/wake_lock"
printf 'fromtmp\n' > $T/src
t "pfs seq $T/src r cfr:65536:$P/wake_lock"
t "pfs r $P/wake_lock"
