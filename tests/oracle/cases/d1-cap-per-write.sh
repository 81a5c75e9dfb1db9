# D1: when is CAP_BLOCK_SUSPEND checked: at open, or at each write?  One fd, and the
# writing thread's effective capability switched off and on between its writes.
. ${LIB:-/lib.sh}
note "root: open wake_lock, then write with the capability, without it, with it again"
t "pfs seq $P/wake_lock w wr:d1a eff:-36 wr:d1b eff:+36 wr:d1c"
t "pfs cat $P/wake_lock"
note "the same on wake_unlock"
t "pfs seq $P/wake_unlock w wr:d1a eff:-36 wr:d1c eff:+36 wr:d1c"
t "pfs cat $P/wake_lock"
note "uid 1000 holding it as an ambient capability (as Android gives system_server), the"
note "files given to it as Android's init does"
chown 1000:1000 $P/wake_lock $P/wake_unlock && chmod 0660 $P/wake_lock $P/wake_unlock
t "pfs as 1000 1000 - 36 pfs seq $P/wake_lock w wr:d1f eff:-36 wr:d1g eff:+36 wr:d1h"
t "pfs as 1000 1000 - 36 pfs seq $P/wake_unlock w wr:d1e eff:-36 wr:d1f eff:+36 wr:d1f wr:d1h"
t "pfs cat $P/wake_lock"
