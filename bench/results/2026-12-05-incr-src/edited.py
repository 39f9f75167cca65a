#!/usr/bin/env python3
"""edited.py TREE [SEED]: the files `scripts/bench_data.py edit apply`
would edit in TREE (500, chosen by SEED, default 5), their total size and
the largest five, without editing anything."""
import importlib.util
import os
import random
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "bench_data", os.path.join(here, "../../../scripts/bench_data.py"))
bd = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bd)
root, seed = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "5")
files = bd.regular_files(root)
rng = random.Random(f"larder-bench-edit-{seed}")
edit = rng.sample(files, bd.N_EDIT + bd.N_DELETE)[:bd.N_EDIT]
sizes = sorted(((os.path.getsize(p), p) for p in edit), reverse=True)
print(f"{root}: {len(files)} files; the {len(edit)} edited hold "
      f"{sum(s for s, _ in sizes) / 2**20:.1f} MiB")
for s, p in sizes[:5]:
    print(f"  {s / 2**20:8.1f} MiB  {os.path.relpath(p, root)}")
