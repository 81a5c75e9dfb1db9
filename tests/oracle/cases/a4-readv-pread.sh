# A4: readv with several small iovecs; pread at offsets 0, 1, len-1, len, 4095, 4096, 2^31.
. ${LIB:-/lib.sh}
setup_locks
note "A4 readv / pread. wake_lock: ab longer_lock_name (20 bytes); wake_unlock: unl"
battery() {
	f=$1; len=$(pfs seq $f r read:65536 | sed -n "s/^read(65536) = \([0-9]*\).*/\1/p")
	note "==== $f (content length $len)"
	t "pfs seq $f r readv:1,2,3 readv:4,100 readv:5"
	t "pfs seq $f r readv:0,3,0,2 pos"
	t "pfs seq $f r readv:4096,4096"
	note "pread on ONE fd at 0, 1, len-1, len, 4095, 4096, 2^31 (count 100)"
	t "pfs seq $f r pread:100@0 pread:100@1 pread:100@$((len-1)) pread:100@$len pread:100@4095 pread:100@4096 pread:100@2147483648 pos"
	note "each offset on a fresh fd"
	for o in 1 $((len-1)) $len 4095 4096 2147483648 1099511627776 -1; do t "pfs seq $f r pread:100@$o"; done
	note "pread count 1 at len-1, then count 0"
	t "pfs seq $f r pread:1@$((len-1)) pread:0@0"
}
for f in $FILES; do battery $f; done
drop_locks
battery $P/wakeup_count
