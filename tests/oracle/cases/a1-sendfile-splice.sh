# A1/A2: sendfile(2) and splice(2) on the attribute files and on wakeup_sources.
. ${LIB:-/lib.sh}
setup_locks
note "A1/A2 sendfile and splice. wake_lock holds 2 locks (ab, longer_lock_name); wake_unlock: unl"
battery() {
	f=$1
	note "==== $f"
	t "pfs seq $f r fstat sf:65536 pos sf:65536"
	t "pfs seq $f r sf:65536@0 pos"
	t "pfs seq $f r sf:65536@2 pos"
	t "pfs seq $f r sf:65536@100 pos sf:65536@4096 sf:65536@5000"
	t "pfs seq $f r sff:65536 pos"
	t "pfs seq $f r sff:65536@0 sff:65536@2 sff:65536@100"
	note "partial sendfile (3 bytes), then sendfile again with NULL offset"
	t "pfs seq $f r sf:3 pos sf:3 pos sf:65536 pos"
	note "read() 2 bytes, then sendfile with NULL offset"
	t "pfs seq $f r read:2 sf:65536 pos"
	note "sendfile 2 bytes at explicit offset 0, then read()"
	t "pfs seq $f r sf:2@0 read:100"
	t "pfs seq $f r sp:65536 pos sp:65536"
	t "pfs seq $f r sp:65536@0 pos"
	t "pfs seq $f r sp:65536@2 pos sp:65536@100"
	t "pfs seq $f r read:2 sp:65536"
}
for f in $FILES; do battery $f; done
note "==== wakeup_count (no lock held)"
drop_locks
battery $P/wakeup_count
setup_locks
note "==== repeated sendfile on ONE fd after lseek(0): is a lock added in between visible?"
t "pfs seq $P/wake_lock r sf:65536 seek:set:0 w:$P/wake_lock:added1 sf:65536"
note "same without the lseek (position at EOF), then lseek(0)"
t "pfs seq $P/wake_lock r sf:65536 w:$P/wake_lock:added2 sf:65536 seek:set:0 sf:65536"
note "sendfile 2 bytes, add a lock, sendfile the rest (snapshot kept?)"
t "pfs seq $P/wake_lock r sf:2 w:$P/wake_lock:added3 sf:65536 seek:set:0 sf:65536"
note "explicit offset 0 again after adding a lock (pos stays 0 with explicit offsets)"
t "pfs seq $P/wake_lock r sf:65536@0 w:$P/wake_lock:added4 sf:65536@0 sf:65536@2"
t "pfs seq $WS r sf:65536 seek:set:0 w:$P/wake_lock:added5 sf:65536"
t "pfs seq $WS r read:65536 seek:set:0 w:$P/wake_lock:added6 read:65536"
note "wakeup_count: a lock+unlock pair in between moves the count"
echo ab > $P/wake_unlock; echo longer_lock_name > $P/wake_unlock
for n in added1 added2 added3 added4 added5 added6; do echo $n > $P/wake_unlock; done
t "pfs seq $P/wakeup_count r sf:65536 seek:set:0 w:$P/wake_lock:pair w:$P/wake_unlock:pair sf:65536"
t "pfs seq $P/wakeup_count r sf:1 w:$P/wake_lock:pair w:$P/wake_unlock:pair sf:65536 seek:set:0 sf:65536"
note "the same with splice"
t "pfs seq $P/wakeup_count r sp:65536 seek:set:0 w:$P/wake_lock:pair w:$P/wake_unlock:pair sp:65536"
note "busybox cat (uses sendfile) of each file, and the same bytes through read()"
t "cat $P/wake_unlock $P/wakeup_count $P/state"
t "pfs r $P/wake_unlock; pfs r $P/wakeup_count; pfs r $P/state"
t "cat $WS | head -2"
note "shell writes (O_TRUNC, then a write of N bytes), then busybox cat"
t "echo c1 > $P/wake_lock; echo c2_longer_name > $P/wake_lock; cat $P/wake_lock; pfs r $P/wake_lock"
t "echo c1 > $P/wake_unlock; cat $P/wake_unlock; pfs r $P/wake_unlock"
t "pfs st $P/wake_lock $P/wake_unlock; cat $P/wake_lock"
