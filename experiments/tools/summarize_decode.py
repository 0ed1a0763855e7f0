"""Print decode.csv rows as a table per dtype: us (GB/s, ratio to the fastest baseline)."""
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
by = collections.defaultdict(dict)
names = []
for r in rows:
    key = (r["dtype"], int(r["B"]), int(r["S"]), r["lengths"])
    if r["status"] != "ok":
        by[key][r["backend"]] = r["status"][:20]
    else:
        us = float(r["us_device_median"]); gb = float(r["gbps"] or 0)
        ratio = r["ratio_to_reference"]
        by[key][r["backend"]] = f"{us:8.1f} {gb:5.0f} {float(ratio):5.2f}" if ratio else f"{us:8.1f} {gb:5.0f}   -  "
        hbm = r["hbm_gbps"]
    if r["backend"] not in names: names.append(r["backend"])
print("hbm", hbm)
print(f"{'dtype':9s} {'B':>3s} {'S':>6s} {'len':4s} " + " ".join(f"{n:>20s}" for n in names))
for key in sorted(by):
    print(f"{key[0]:9s} {key[1]:3d} {key[2]:6d} {key[3][:4]:4s} " + " ".join(f"{by[key].get(n, ''):>20s}" for n in names))
