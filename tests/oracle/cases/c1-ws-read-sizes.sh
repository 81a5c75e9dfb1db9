# C1: how many bytes one read(2) of wakeup_sources returns, for read sizes from 1 MiB down.
. ${LIB:-/lib.sh}
note "C1 wakeup_sources read sizes: 90 locks taken and released (the rows hold still)"
i=0; while [ $i -lt 90 ]; do echo NetworkStats.wakeup.$i > $P/wake_lock; echo NetworkStats.wakeup.$i > $P/wake_unlock; i=$((i+1)); done
note "whole listing: $(cat $WS | wc -c) bytes, $(cat $WS | wc -l) lines"
for bs in 1048576 131072 8192 5000 4096 100; do
	note "bs=$bs: first read(2) $(dd if=$WS bs=$bs count=1 2>/dev/null | wc -c) bytes, first two $(dd if=$WS bs=$bs count=2 2>/dev/null | wc -c), first three $(dd if=$WS bs=$bs count=3 2>/dev/null | wc -c)"
done
note "bytes in the header and the rows that fit below 4096 from the start:"
awk '{ n += length($0) + 1; if (n >= 4096) exit; k = n } END { print k }' $WS
