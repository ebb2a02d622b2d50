source /lab/guest/scenarios/zombie-common.sh
# The same outage with iscsid alone: the reference figure (a zombie never recovers by itself).
scenario_zombie_iscsid_alone() {
	dmesg -C
	zombie_run
	sleep 30
	local io=$(io_ok_after $(python3 -c "print($T_UP + 1)"))
	local last=$(tail -1 "$OUT/io.log" | awk '{print $3}')
	figure zombie_formed $(zombie_seen && echo yes || echo no)
	figure io_flowing_after_link_up_s $(since $T_UP "$io" never_within_30)
	figure last_io_round $last
	SCEN_PASS_REASON="reference run (see its figures: zombie_formed, io_flowing_after_link_up_s)"
}
