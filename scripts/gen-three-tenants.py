#!/usr/bin/env python3
"""Writes examples/replay/three-tenants.csv and three-tenants-{nodes,queues}.csv: three equal-
weight queues sharing 64 GPUs for 7 days, each with bursty demand (a few large bursts, quiet
hours between), together more than the cluster can run. Deterministic (fixed seed).

    python3 scripts/gen-three-tenants.py
"""
import random

rng = random.Random(34)
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


# team-a: a heavy start and a second wave; team-b: mid-week; team-c: a steady stream.
for day, size in [(0, 2600), (3, 1800)]:
    burst("team-a", day * 24, 10, size)
for day, size in [(1, 2200), (2, 1200), (4, 1600)]:
    burst("team-b", day * 24 + 6, 8, size)
for day in range(DAYS):
    burst("team-c", day * 24, 20, 650)

jobs.sort(key=lambda j: (j[1], j[0]))
with open("examples/replay/three-tenants.csv", "w") as f:
    f.write("# Three equal-weight tenants on 64 GPUs for 7 days, bursty demand (scripts/gen-three-tenants.py;\n")
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
print(len(jobs), "jobs,", round(sum(j[2] * j[3] * j[4] for j in jobs) / HOUR), "GPU-hours of", 64 * 24 * DAYS)
