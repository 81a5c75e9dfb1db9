# A7: lseek SEEK_SET/CUR/END to 2^31-1, 2^31, 2^40, -1; SEEK_DATA/SEEK_HOLE at 0 and 10;
# a read() afterwards; fstat/stat st_size and st_blocks.
. ${LIB:-/lib.sh}
setup_locks
note "A7 lseek. wake_lock: ab longer_lock_name (20 bytes)"
battery() {
	f=$1
	note "==== $f"
	t "pfs st $f"
	for wh in set cur end; do
		for o in 2147483647 2147483648 1099511627776 -1; do
			t "pfs seq $f r seek:$wh:$o pos read:100 pos"
		done
	done
	for wh in data hole; do
		for o in 0 10; do t "pfs seq $f r seek:$wh:$o pos read:100"; done
	done
	note "after reading the whole content: SEEK_CUR -1, SEEK_END 0, SEEK_DATA/HOLE at 2"
	t "pfs seq $f r read:4096 seek:cur:-1 read:100 seek:end:0 read:100 seek:data:2 seek:hole:2 seek:set:0 read:3"
	note "SEEK_SET to 5 then read; then SEEK_SET 2147483647 then read"
	t "pfs seq $f r seek:set:5 read:100 seek:set:2147483647 read:100"
}
for f in $FILES; do battery $f; done
drop_locks
battery $P/wakeup_count
note "stat of the directory and of every file"
t "pfs st $P $P/suspend_stats"
t "pfs st $P/* $P/suspend_stats/*"
