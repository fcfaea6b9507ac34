#!/bin/sh
# measure.sh SECONDS CMD...: CMD's own CPU share of one core, and its runnable share (run time +
# run-queue delay, /proc/PID/schedstat), over SECONDS after its first second.
secs=$1; shift
"$@" > /dev/null 2>&1 &
pid=$!
sleep 1
c0=$(awk '{print $14+$15}' /proc/$pid/stat); r0=$(awk '{printf "%.0f", $1+$2}' /proc/$pid/schedstat)
sleep "$secs"
c1=$(awk '{print $14+$15}' /proc/$pid/stat); r1=$(awk '{printf "%.0f", $1+$2}' /proc/$pid/schedstat)
kill $pid 2>/dev/null; wait $pid 2>/dev/null
tck=$(getconf CLK_TCK)
echo "$* : cpu $(echo "scale=1; 100*($c1-$c0)/$tck/$secs" | bc) %, runnable $(echo "scale=1; 100*($r1-$r0)/1000000000/$secs" | bc) % of ${secs}s (load $(cut -d' ' -f1 /proc/loadavg))"
