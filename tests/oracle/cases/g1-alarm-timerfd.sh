# G1: what /proc/PID/fdinfo says of a timerfd on each alarm clock (what
# --backend=freeze:CGROUP reads to find a container's alarms): the clock id,
# the time left while armed, after a disarm, once expired and unread, and
# after its read.  CLOCK_BOOTTIME (7) for comparison.
. ${LIB:-/lib.sh}
note "G1 CLOCK_BOOTTIME_ALARM"
t "pfs tfd 9 5000"
note "CLOCK_REALTIME_ALARM"
t "pfs tfd 8 5000"
note "CLOCK_BOOTTIME, not an alarm clock"
t "pfs tfd 7 5000"
