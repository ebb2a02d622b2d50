#!/bin/bash
# The systemd guest's runner (lab-test.service, after multi-user.target): runs the batch named
# by lab.batch= from the share, saves the journal, powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
OUT=/lab/results/default; BATCH=none
for a in $(cat /proc/cmdline); do
	case $a in lab.out=*) OUT=${a#lab.out=} ;; lab.batch=*) BATCH=${a#lab.batch=} ;; esac
done
mkdir -p "$OUT"; export OUT BATCH LAB_INIT=systemd
echo "sd-init: uptime=$(cut -d' ' -f1 /proc/uptime) batch=$BATCH pid1=$(cat /proc/1/comm)"
systemd-analyze > "$OUT/boot-time.txt" 2>&1
timeout 1500 bash /lab/guest/batches/$BATCH.sh > >(tee "$OUT/batch.log") 2>&1
echo "batch rc=$?" >> "$OUT/batch.log"
sleep 1
journalctl -b --no-pager -o short-monotonic > "$OUT/journal-all.txt" 2>&1
dmesg > "$OUT/dmesg-at-poweroff.txt"
sync
systemctl --no-block poweroff
