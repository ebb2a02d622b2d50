#!/bin/bash
# The tiny init's second stage (exec'd by /usr/local/sbin/lab-init from the 9p share).
# Kernel command line: lab.batch=<name> lab.out=<dir under /lab>. Runs guest/batches/<name>.sh,
# saves the kernel log, powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t tmpfs tmpfs /run; mkdir -p /run/lock
mount -t tmpfs tmpfs /tmp
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
modprobe configfs; mount -t configfs configfs /sys/kernel/config
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
hostname lab
ip link set lo up
ln -sf /proc/self/fd /dev/fd 2>/dev/null
BATCH=none; OUT=/lab/results/default
for a in $(cat /proc/cmdline); do
	case $a in
	lab.batch=*) BATCH=${a#lab.batch=} ;;
	lab.out=*) OUT=${a#lab.out=} ;;
	esac
done
mkdir -p "$OUT"
export OUT BATCH LAB_INIT=tiny
echo "lab init: batch=$BATCH out=$OUT uptime=$(cut -d' ' -f1 /proc/uptime) kernel=$(uname -r)" > /dev/console
if [ -f /lab/guest/batches/$BATCH.sh ]; then
	bash /lab/guest/batches/$BATCH.sh > >(tee "$OUT/batch.log" > /dev/console) 2>&1
	echo "batch rc=$?" >> "$OUT/batch.log"
else
	echo "no such batch $BATCH" > /dev/console
fi
sleep 1
dmesg > "$OUT/dmesg-at-poweroff.txt"
sync
umount /lab 2>/dev/null
echo o > /proc/sysrq-trigger
sleep 5
poweroff -f
