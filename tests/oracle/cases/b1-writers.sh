# B1/B4: a second writer of state, wakeup_count or autosleep while a state write ("mem",
# pm_test=freezer, pm_test_delay=3 s) is in progress. suspend_stats after each.
# powerfs-args: --simulate-sleep-ms=3000 '--simulate-states=freeze mem'
. ${LIB:-/lib.sh}
pmtest freezer 3
kmsg > /dev/null
stats
run2() { # LABEL DELAY_MS FILE DATA: "mem" -> state in the background; after DELAY_MS a second writer
	note "---- $1: state <- mem in the background; after $2 ms: $3 <- $4"
	t0=$(pfs ms)
	pfs wt $P/state mem > $T/w1 2>&1 &
	p1=$!
	usleep $(($2 * 1000))
	echo "# first writer now: $(pst $p1 | sed 's/# //')"
	t1=$(pfs ms)
	pfs wt $3 "$4" > $T/w2 2>&1 &
	p2=$!
	usleep 300000
	echo "# 300 ms later: first: $(pst $p1 | sed 's/# //'); second: $(pst $p2 | sed 's/# //')"
	wait $p1 $p2
	echo "# script: first started ~ms=$t0, second started ~ms=$t1, both done at ms=$(pfs ms)"
	sed 's/^/# first:  /' $T/w1; sed 's/^/# second: /' $T/w2
	hold_log; kmsg; stats
}
note "==== part 1: the second writer starts 300 ms after the first (on the kernel: tasks are frozen by then)"
run2 "state vs state" 300 $P/state mem
c=$(pfs cat $P/wakeup_count)
run2 "state vs wakeup_count (current value $c)" 300 $P/wakeup_count "$c"
run2 "state vs autosleep off" 300 $P/autosleep off
note "==== part 2: the first writer is held 2 s inside its write before tasks are frozen (kernel:"
note "console switch held by vtproc); the second writer starts 300 ms after the first"
hold_start 2000
run2 "held state vs state" 300 $P/state mem
c=$(pfs cat $P/wakeup_count)
run2 "held state vs wakeup_count (current value $c)" 300 $P/wakeup_count "$c"
c=$(pfs cat $P/wakeup_count)
run2 "held state vs wakeup_count garbage" 300 $P/wakeup_count "foo"
run2 "held state vs autosleep off" 300 $P/autosleep off
hold_stop
t "pfs cat $P/autosleep $P/wakeup_count"
stats
