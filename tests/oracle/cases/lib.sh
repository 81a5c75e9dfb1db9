# Helpers for the tests/oracle cases (busybox sh). Sourced as ${LIB:-/lib.sh} (run-oracle copies it to /lib.sh).
# Paths come from variables so that one case runs both on the reference kernel
# (the defaults below) and on a powerfs mount (run sets P=MOUNT, WS=MOUNT/wakeup_sources).
#   t CMD...      print "$ CMD", run it with sh -c (stderr merged), print "rc=N"
#   ws NAME...    wakeup_sources header + the rows of NAME..., through cat -A
#   note TEXT     a "#" comment line
#   kernel        true on the reference kernel (P is /sys/power), false on powerfs
#   pmtest L D    pm_test=L and pm_test_delay=D seconds, when those files exist
#   stats         one line with the suspend_stats counters that move here
#   pst PID       the State field of /proc/PID/stat (and wchan)
#   waitpid_state PID S...  wait (up to 10 s) until PID's state is one of S... and print it
#   waitline FILE TEXT      wait (up to 10 s) until FILE contains TEXT
#                 (WAITMAX=N: N hundredths of a second instead of 10 s)
P=${P:-/sys/power}
WS=${WS:-/sys/kernel/debug/wakeup_sources}
PTD=${PTD:-/sys/module/suspend/parameters/pm_test_delay}
export P WS PTD
t() { echo "\$ $*"; sh -c "$*" 2>&1; echo "rc=$?"; }
ws() {
	echo "# wakeup_sources header + rows for: $*"
	head -n 1 $WS | cat -A
	for n in "$@"; do awk -v n="$n" -F'\t' 'NR>1 { s=$1; sub(/ +$/, "", s); if (s == n) print }' $WS | cat -A; done
}
note() { echo "# $*"; }
kernel() { [ "$P" = /sys/power ]; }
pmtest() {
	if kernel; then
		echo "$1" > $P/pm_test; echo "$2" > $PTD
		note "pm_test=$(cat $P/pm_test | sed 's/.*\[\(.*\)\].*/\1/') pm_test_delay=$(cat $PTD)"
	else
		note "pm_test left alone on powerfs (its simulated sleep length is set by the run script)"
	fi
}
stats() {
	s=$P/suspend_stats
	echo "# suspend_stats: success=$(cat $s/success) fail=$(cat $s/fail) failed_freeze=$(cat $s/failed_freeze) last_failed_errno=$(cat $s/last_failed_errno) last_failed_step=[$(cat $s/last_failed_step)]"
}
pst() {
	if [ -r /proc/$1/stat ]; then
		echo "# /proc/$1/stat state: $(sed 's/^.*) //' /proc/$1/stat 2>/dev/null | cut -d' ' -f1) wchan: $(cat /proc/$1/wchan 2>/dev/null)"
	else
		echo "# /proc/$1: gone"
	fi
}
waitpid_state() {
	p=$1; shift; i=0
	while [ $i -lt ${WAITMAX:-1000} ]; do
		[ -r /proc/$p/stat ] || { echo "# pid $p gone"; return 1; }
		st=$(sed 's/^.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f1)
		for s in "$@"; do [ "$st" = "$s" ] && { pst $p; return 0; }; done
		usleep 10000; i=$((i+1))
	done
	echo "# pid $p still in state $st after $((${WAITMAX:-1000} / 100)) s"; return 1
}
waitline() {
	i=0
	while [ $i -lt ${WAITMAX:-1000} ]; do grep -q "$2" "$1" 2>/dev/null && return 0; usleep 10000; i=$((i+1)); done
	echo "# timeout ($((${WAITMAX:-1000} / 100)) s) waiting for '$2' in $1"; return 1
}
# Safety: the default P is the real /sys/power; outside the reference VM (whose init runs
# /test.sh) a case must be given P pointing at a powerfs mount.
if [ "$P" = /sys/power ] && [ ! -e /test.sh ]; then
	echo "lib.sh: P=/sys/power outside the oracle VM: refusing (set P to a powerfs mount)" >&2
	exit 2
fi
# The files whose read paths the A cases probe (wakeup_count separately: it blocks while a
# lock is held). setup_locks leaves wake_lock = "ab longer_lock_name\n" (two active locks
# of different name lengths) and wake_unlock = "unl\n".
setup_locks() {
	echo unl > $P/wake_lock; echo unl > $P/wake_unlock
	echo ab > $P/wake_lock; echo longer_lock_name > $P/wake_lock
}
drop_locks() { echo ab > $P/wake_unlock; echo longer_lock_name > $P/wake_unlock; }
FILES="$P/state $P/wake_lock $P/wake_unlock $P/suspend_stats/success $WS"
T=${T:-/tmp}; export T   # scratch directory (tmpfs in the VM)
# hold_start MS: on the reference kernel, make every suspend wait MS ms in its console
# switch (pm_prepare_console), i.e. inside the state write with its locks held, BEFORE
# tasks are frozen (pfs vtproc puts tty1 in VT_PROCESS mode). On powerfs nothing freezes:
# only a note. hold_stop ends it.
hold_start() {
	if kernel; then
		pfs vtproc /dev/tty1 $1 > $T/vtproc 2>&1 &
		vtp=$!
		waitline $T/vtproc VT_PROCESS; sed 's/^/# /' $T/vtproc; vtl=1
	else
		note "no console-switch hold here (powerfs does not freeze tasks)"
	fi
}
hold_log() { # the vtproc lines not shown yet
	[ -n "$vtp" ] || return 0
	tail -n +$((vtl+1)) $T/vtproc | sed 's/^/# /'; vtl=$(wc -l < $T/vtproc)
}
hold_stop() {
	[ -n "$vtp" ] || return 0
	kill $vtp; wait $vtp 2>/dev/null; hold_log; vtp=
}
# kmsg: the kernel's suspend log lines since the last kmsg call (reference kernel only;
# the first call switches printk timestamps on: [seconds since boot], close to pfs ms)
kmsg() {
	kernel || return 0
	echo Y > /sys/module/printk/parameters/time
	dmesg -c 2>/dev/null | grep -E 'PM:|[Ff]reez|Restarting|OOM|refusing|task:|suspend' | sed 's/^/# kmsg: /'
}
# waitgone PID SECS: wait until PID has exited (zombie or reaped); false after SECS seconds
waitgone() {
	i=0
	while [ $i -lt $(($2 * 100)) ]; do
		[ -r /proc/$1/stat ] || return 0
		[ "$(sed 's/^.*) //' /proc/$1/stat 2>/dev/null | cut -d' ' -f1)" = Z ] && return 0
		usleep 10000; i=$((i+1))
	done
	return 1
}
# sig_and_reap PID SIG: send SIG, wait up to 3 s for the exit and print the exit status;
# if it is still there, say so, try SIGKILL, and if even that fails call the case's
# on_stuck PID function if it has one, else remember PID in $stuck
sig_and_reap() {
	t0=$(pfs ms); kill -$2 $1; echo "# kill -$2 at ms=$t0"
	if waitgone $1 3; then wait $1; echo "# exit status $?"; return 0; fi
	echo "# STILL THERE 3 s after SIG$2: $(pst $1 | sed 's/# //')"
	[ $2 = KILL ] || kill -KILL $1
	if waitgone $1 3; then wait $1; echo "# after SIGKILL: exit status $?"; return 0; fi
	echo "# STILL THERE 3 s after SIGKILL: $(pst $1 | sed 's/# //')"
	if type on_stuck >/dev/null 2>&1; then on_stuck $1; else stuck="$stuck $1"; fi
}
