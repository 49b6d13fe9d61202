"""What a plan costs: memory per rank, the usable memory it leaves (pplan.cost.usable), bytes on the wire and
where they travel, seconds per pass, the simulated pipeline, the step time and its sensitivity to the hardware
figures."""
