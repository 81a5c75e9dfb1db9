# A8: a wakeup_count reader blocked (a lock held) through read, sendfile and splice:
# process state, SIGUSR1 with a handler (with and without SA_RESTART), SIGKILL, and other
# readers meanwhile.
. ${LIB:-/lib.sh}
echo held > $P/wake_lock
note "A8 lock 'held' is active: every wakeup_count reader blocks"
n=0; stuck=
on_stuck() { # a reader no signal ends: unlock so that it can finish, then lock again
	t0=$(pfs ms); echo held > $P/wake_unlock
	if waitgone $1 5; then wait $1; echo "# unlocked held at ms=$t0: now it exited, status $?"
	else echo "# unlocked held at ms=$t0: still there 5 s later: $(pst $1 | sed 's/# //')"; stuck="$stuck $1"; fi
	echo held > $P/wake_lock
}
block() { # METHOD MODE: start a blocked reader, print its state; leaves $bp and $bo
	n=$((n+1)); bo=$T/blk$n
	pfs blk $1 $P/wakeup_count $2 > $bo 2>&1 &
	bp=$!
	WAITMAX=300 waitline $bo "pid=" > $T/st$n && WAITMAX=300 waitpid_state $bp S D >> $T/st$n
	sleep 0.3; echo "# after 0.3 s more: $(pst $bp | sed 's/^# //')" >> $T/st$n
}
for m in read sendfile splice sendfile@0 splice@0 pread@0 pread@100 sendfile@100; do
	for mode in norestart restart; do
		note "---- $m, SIGUSR1 handler ($mode)"
		block $m $mode
		cat $T/st$n
		sig_and_reap $bp USR1
		cat $bo
	done
	note "---- $m, SIGKILL"
	block $m norestart
	cat $T/st$n
	sig_and_reap $bp KILL; cat $bo
done
note "---- SIGSTOP + SIGCONT to a blocked sendfile reader"
block sendfile norestart
cat $T/st$n
kill -STOP $bp; usleep 200000; pst $bp
sig_and_reap $bp CONT; cat $bo
note "---- other processes while a read reader, then a sendfile reader, then a splice reader are blocked"
note "(first unlock and lock 'held' again, so that nothing from the cases above is left pending)"
echo held > $P/wake_unlock; echo held > $P/wake_lock
block read norestart; p3=$bp; o3=$bo; cat $T/st$n
block sendfile norestart; p1=$bp; o1=$bo; cat $T/st$n
block splice norestart; p2=$bp; o2=$bo; cat $T/st$n
note "a 4th reader with alarm(1): does it reach the same wait (EINTR after 1 s)?"
pfs ra $P/wakeup_count 1 > $T/ra 2>&1 & rp=$!
if waitgone $rp 4; then wait $rp; cat $T/ra; else echo "# 4th reader STILL THERE 4 s later: $(pst $rp | sed 's/# //')"; stuck="$stuck $rp"; fi
note "other files meanwhile"
t "pfs r $P/wake_lock; pfs r $P/state"
note "unlock from another process; all three blocked readers return"
t0=$(pfs ms); echo held > $P/wake_unlock; echo "# unlocked at ms=$t0"
for p in $p1 $p2 $p3; do if waitgone $p 5; then wait $p; else echo "# $p STILL THERE 5 s after the unlock: $(pst $p | sed 's/# //')"; fi; done
cat $o1 $o2 $o3
if [ -n "$stuck" ]; then
	note "processes that no signal ended, after the unlock:"
	for p in $stuck; do if waitgone $p 3; then echo "# $p has exited now"; else pst $p; fi; done
fi
t "pfs r $P/wakeup_count"
