# A5/A6: mmap(PROT_READ) shared and private; open with O_DIRECT (read-only, write-only,
# read-write) and O_RDONLY|O_NONBLOCK.
. ${LIB:-/lib.sh}
setup_locks
note "A5 mmap"
for f in $FILES; do
	t "pfs seq $f r mmap:shared:4096 mmap:private:4096 fstat"
done
drop_locks
t "pfs seq $P/wakeup_count r mmap:shared:4096 mmap:private:4096"
t "pfs seq $P/wake_lock rw mmap:shared:4096"
setup_locks
note "A6 open flags"
for f in $FILES $P/wakeup_count; do
	[ $f = $P/wakeup_count ] && drop_locks
	t "pfs seq $f r,direct read:4096"
	t "pfs seq $f w,direct"
	t "pfs seq $f rw,direct"
	t "pfs seq $f r,nonblock read:4096"
done
note "O_DIRECT writers: do the writes work?"
t "pfs seq $P/wake_lock w,direct wr:direct1"
t "pfs seq $P/wake_lock rw,direct wr:direct2 pread:100@0"
t "pfs seq $P/wake_unlock w,direct wr:direct1"
t "pfs r $P/wake_lock; pfs r $P/wake_unlock"
note "O_RDONLY|O_NONBLOCK on wakeup_count with a lock held: does read still block? (SIGALRM after 1 s)"
echo held > $P/wake_lock
t "pfs ran $P/wakeup_count 1"
echo held > $P/wake_unlock
note "mmap(MAP_PRIVATE) of wakeup_count while a lock is held, then touching the page (background, 3 s limit)"
echo held > $P/wake_lock
pfs seq $P/wakeup_count r mmap:private:4096 > $T/mm 2>&1 & mp=$!
if waitgone $mp 3; then wait $mp; echo "# exit status $?"; else
	echo "# STILL THERE 3 s later: $(pst $mp | sed 's/# //')"; kill -KILL $mp
	if waitgone $mp 3; then wait $mp; echo "# after SIGKILL: exit status $?"; else echo "# STILL THERE after SIGKILL: $(pst $mp | sed 's/# //')"; fi
fi
t0=$(pfs ms); echo held > $P/wake_unlock; echo "# unlocked at ms=$t0"
waitgone $mp 5 || echo "# STILL THERE 5 s after the unlock"
cat $T/mm
