# B3/B4: a second state writer queued behind a first one that is still inside its write
# (held 2 s before freezing, see hold_start) gets a signal while it waits.
# powerfs-args: --simulate-sleep-ms=3000 '--simulate-states=freeze mem'
. ${LIB:-/lib.sh}
pmtest freezer 1
kmsg > /dev/null
stats
hold_start 2000
queued() { # LABEL FILE DATA HANDLER SIGNAL
	note "---- $1: first state <- mem; 300 ms later second $2 <- $3 ($4); 300 ms later kill -$5 second"
	pfs wt $P/state mem > $T/w1 2>&1 & p1=$!
	usleep 300000
	pfs wt $2 "$3" $4 > $T/w2 2>&1 & p2=$!
	usleep 300000
	echo "# before the signal: first $(pst $p1 | sed 's/# //'), second $(pst $p2 | sed 's/# //')"
	t0=$(pfs ms); kill -$5 $p2; echo "# kill -$5 at ms=$t0"
	usleep 100000; echo "# 100 ms after the signal: second $(pst $p2 | sed 's/# //')"
	if [ $5 = STOP ]; then
		wait $p1; echo "# first returned; second $(pst $p2 | sed 's/# //')"
		t0=$(pfs ms); kill -CONT $p2; echo "# kill -CONT at ms=$t0"
	fi
	wait $p2; echo "# second's exit status $?"
	wait $p1
	sed 's/^/# first:  /' $T/w1; sed 's/^/# second: /' $T/w2
	hold_log; kmsg; stats
}
queued "state, handler without SA_RESTART" $P/state mem h USR1
queued "state, handler with SA_RESTART" $P/state mem h,restart USR1
queued "state, SIGKILL" $P/state mem h KILL
queued "state, SIGSTOP (SIGCONT after the first returned)" $P/state mem h STOP
queued "wakeup_count, handler without SA_RESTART" $P/wakeup_count "$(pfs cat $P/wakeup_count)" h USR1
queued "autosleep off, handler without SA_RESTART" $P/autosleep off h USR1
hold_stop
t "pfs cat $P/autosleep"
stats
