#!/usr/bin/env python3
"""Writes examples/replay/three-tenants.csv and three-tenants-{nodes,queues}.csv: three equal-
weight queues sharing 64 GPUs for a week, with bursty demand. Deterministic (fixed seed).

    python3 scripts/gen-three-tenants.py [SEED]   # default 34, the committed trace

The shape: team-a bursts at midnight on days 0, 1, 3 and 4 (about 500 GPU-hours arriving
within 6 hours, eight hours of the whole cluster), team-b at 08:00 on days 1, 2, 4 and 5 (450)
and briefly on day 6, team-c a steady stream 20 hours a day (300 a day). Each burst is more
than the cluster can run at once, the week as a whole about 60% of it, so queues wait behind
each other's bursts and then drain, as a shared GPU cluster does; the last arrivals come early
on day 6, so with every job started the run ends within the week and `--fair-window 168h`
gives one index for the whole run. One job in twenty is a 32-GPU gang (4 x 8 GPUs): more than
a queue's weighted share of 64 GPUs whenever the three ask at once.
"""
import random
import sys

rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 34)
HOUR = 3600
DAYS = 7
jobs = []


def burst(queue, start_h, hours, gpu_hours):
    """Jobs of `queue` arriving over `hours` from `start_h`, about `gpu_hours` of work."""
    total = 0.0
    n = 0
    while total < gpu_hours:
        shape = rng.random()
        if shape < 0.05:
            members, gpu = 4, 8  # a 32-GPU gang: more than a queue's weighted share of 64 GPUs
        elif shape < 0.15:
            members, gpu = 2, 8  # a 16-GPU gang
        elif shape < 0.45:
            members, gpu = 1, 8  # one node
        elif shape < 0.75:
            members, gpu = 2, 2
        else:
            members, gpu = 1, 1
        duration = rng.choice([1, 2, 2, 3, 4, 6]) * HOUR
        submit = int((start_h + rng.random() * hours) * HOUR)
        n += 1
        jobs.append((f"{queue[-1]}-{start_h:03d}-{n:03d}", submit, duration, members, gpu, queue))
        total += members * gpu * duration / HOUR


for day in [0, 1, 3, 4]:
    burst("team-a", day * 24, 6, 500)
for day in [1, 2, 4, 5]:
    burst("team-b", day * 24 + 8, 6, 450)
burst("team-b", 6 * 24, 4, 225)
for day in range(DAYS - 1):
    burst("team-c", day * 24, 20, 300)
burst("team-c", 6 * 24, 6, 150)

jobs.sort(key=lambda j: (j[1], j[0]))
with open("examples/replay/three-tenants.csv", "w") as f:
    f.write("# Three equal-weight tenants on 64 GPUs for a week, bursty demand (scripts/gen-three-tenants.py;\n")
    f.write("# docs/queues.md measures fairness over time on it).\n")
    f.write("job,submit,duration,members,min_members,cpu,memory,gpu,queue\n")
    for name, submit, duration, members, gpu, queue in jobs:
        f.write(f"{name},{submit},{duration},{members},{members},1,4Gi,{gpu},{queue}\n")
with open("examples/replay/three-tenants-nodes.csv", "w") as f:
    f.write("# 8 nodes of 8 GPUs for three-tenants.csv.\nnode,cpu,memory,gpu\n")
    for i in range(8):
        f.write(f"gpu-{i},64,512Gi,8\n")
with open("examples/replay/three-tenants-queues.csv", "w") as f:
    f.write("# The queues of three-tenants.csv, equal weights.\nqueue,weight\n")
    for q in ["team-a", "team-b", "team-c"]:
        f.write(f"{q},1\n")
gangs = sum(1 for j in jobs if j[3] * j[4] >= 32)
print(len(jobs), "jobs,", gangs, "of 32 GPUs,", round(sum(j[2] * j[3] * j[4] for j in jobs) / HOUR), "GPU-hours of", 64 * 24 * DAYS)
