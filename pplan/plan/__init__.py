"""One parallel configuration: the validated plan (`configuration`: t, p, v, cp, d, micro-batch, m, schedule,
recompute, ZeRO) and how its layers are cut into chunks and placed on ranks (`layout`)."""
