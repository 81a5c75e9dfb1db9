# B2/B4: wakeup_count readers blocked (a lock held) when a suspend (state <- mem,
# pm_test=freezer, pm_test_delay=3 s) freezes tasks; readers that retry at once.
# powerfs-args: --simulate-sleep-ms=3000 '--simulate-states=freeze mem'
. ${LIB:-/lib.sh}
pmtest freezer 3
kmsg > /dev/null
stats
suspend_bg() { pfs wt $P/state mem > $T/w 2>&1 & wp=$!; }
suspend_done() { wait $wp; sed 's/^/# writer: /' $T/w; hold_log; kmsg; stats; }

note "---- (a) lock h held; a reader retrying at once (up to 5 attempts) is blocked; suspend"
echo h > $P/wake_lock
pfs rloop $P/wakeup_count 5 > $T/r 2>&1 & rp=$!
waitpid_state $rp S D
suspend_bg
wait $wp; echo "# writer returned at ms=$(pfs ms)"
usleep 500000; echo "# 0.5 s after the writer returned, reader: $(pst $rp | sed 's/# //')"
t0=$(pfs ms); echo h > $P/wake_unlock; echo "# unlocked h at ms=$t0"
wait $rp; cat $T/r
sed 's/^/# writer: /' $T/w; kmsg; stats

note "---- (b) as (a), the writer held 1.5 s before freezing (console switch): reader state meanwhile"
hold_start 1500
echo h > $P/wake_lock
pfs rloop $P/wakeup_count 5 > $T/r 2>&1 & rp=$!
waitpid_state $rp S D
suspend_bg
usleep 500000; echo "# 0.5 s into the write: writer $(pst $wp | sed 's/# //'), reader $(pst $rp | sed 's/# //')"
wait $wp; echo "# writer returned at ms=$(pfs ms)"
usleep 500000; echo "# 0.5 s after the writer returned, reader: $(pst $rp | sed 's/# //')"
t0=$(pfs ms); echo h > $P/wake_unlock; echo "# unlocked h at ms=$t0"
wait $rp; cat $T/r
suspend_done
hold_stop

note "---- (c) lock h held, reader blocked; the script unlocks h and at once writes mem to state"
echo h > $P/wake_lock
pfs rloop $P/wakeup_count 5 > $T/r 2>&1 & rp=$!
waitpid_state $rp S D
t0=$(pfs ms); echo h > $P/wake_unlock; pfs wt $P/state mem > $T/w 2>&1; echo "# unlocked h at ms=$t0, writer done at ms=$(pfs ms)"
wait $rp; cat $T/r
sed 's/^/# writer: /' $T/w; kmsg; stats

note "---- (d) timed lock (1.5 s) held, retrying reader blocked; suspend of 3 s: the lock expires meanwhile"
echo "tl 1500000000" > $P/wake_lock
pfs rloop $P/wakeup_count 5 > $T/r 2>&1 & rp=$!
waitpid_state $rp S D
t0=$(pfs ms); echo "# suspend starts at ms=$t0"
pfs wt $P/state mem > $T/w 2>&1
wait $rp; cat $T/r
sed 's/^/# writer: /' $T/w; kmsg; stats
ws tl

note "---- (e) single blocked readers (no retry) through read (SIGUSR1 handler with SA_RESTART), sendfile, splice"
echo h > $P/wake_lock
pfs blk read $P/wakeup_count restart > $T/b1 2>&1 & b1=$!
pfs blk sendfile $P/wakeup_count norestart > $T/b2 2>&1 & b2=$!
pfs blk splice $P/wakeup_count norestart > $T/b3 2>&1 & b3=$!
waitline $T/b3 pid= ; waitpid_state $b1 S D; waitpid_state $b2 S D; waitpid_state $b3 S D
pfs wt $P/state mem > $T/w 2>&1
echo "# writer done at ms=$(pfs ms); readers: $(pst $b1 | sed 's/# //'), $(pst $b2 | sed 's/# //'), $(pst $b3 | sed 's/# //')"
usleep 300000
t0=$(pfs ms); echo h > $P/wake_unlock; echo "# unlocked h at ms=$t0"
wait $b1 $b2 $b3; cat $T/b1 $T/b2 $T/b3
sed 's/^/# writer: /' $T/w; kmsg; stats

note "---- (f) reader blocked (lock h); the writer is held 1.5 s before freezing; the script unlocks h"
note "0.5 s into the write, i.e. after the suspend began but before tasks are frozen"
hold_start 1500
echo h > $P/wake_lock
pfs rloop $P/wakeup_count 5 > $T/r 2>&1 & rp=$!
waitpid_state $rp S D
suspend_bg
usleep 500000
t0=$(pfs ms); echo h > $P/wake_unlock; echo "# unlocked h at ms=$t0"
usleep 200000; echo "# 0.2 s later: reader $(pst $rp | sed 's/# //'), writer $(pst $wp | sed 's/# //')"
wait $rp; cat $T/r
suspend_done
hold_stop
t "pfs cat $P/wakeup_count"
