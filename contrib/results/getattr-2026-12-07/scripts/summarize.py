#!/usr/bin/python3
"""Tables from opcount.py's runs: counts.csv and causes.txt (why each
non-data request was sent: the requesting syscall path, from kstack)."""
import csv, json, re, sys
OPS = {1: "LOOKUP", 3: "GETATTR", 4: "SETATTR", 9: "MKDIR", 10: "UNLINK", 11: "RMDIR",
       12: "RENAME", 14: "OPEN", 15: "READ", 16: "WRITE", 18: "RELEASE", 20: "FSYNC",
       22: "GETXATTR", 25: "FLUSH", 27: "OPENDIR", 28: "READDIR", 29: "RELEASEDIR",
       30: "FSYNCDIR", 35: "CREATE", 44: "READDIRPLUS", 1100: "notify_inval_inode (daemon)",
       1110: "notify_inval_entry (daemon)"}
SKIP = ("fuse_request_assign", "fuse_uring_queue", "fuse_dev_queue", "__fuse_simple",
        "entry_SYSCALL", "do_syscall", "flush_bg_queue")
out_csv, out_txt, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
w = csv.writer(open(out_csv, "w"))
w.writerow(["run", "phase", "transactions", "opcode", "requests", "per_transaction"])
txt = open(out_txt, "w")
for r in runs:
    d = json.load(open(r + "/counts.json"))
    for phase, ops in (("load", d.get("load", {})), ("run", d["ops"])):
        tx = d["tx"] if phase == "run" else ""
        for k, v in sorted(ops.items(), key=lambda kv: int(kv[0])):
            w.writerow([r, phase, tx, OPS.get(int(k), k), v,
                        "%.4f" % (v / d["tx"]) if phase == "run" else ""])
        path = "%s/bpftrace-%s.out" % (r, phase)
        try:
            t = open(path).read()
        except OSError:
            continue
        agg = {}
        for m in re.finditer(r"@st\[(\d+), ([^,]+), \n(.*?)\]: (\d+)", t, re.S):
            frames = [f.strip().split("+")[0] for f in m.group(3).strip().splitlines()]
            frames = [f for f in frames if not f.startswith(SKIP)]
            key = (OPS.get(int(m.group(1)), m.group(1)), " < ".join(frames[:5]))
            agg[key] = agg.get(key, 0) + int(m.group(4))
        txt.write("== %s, %s%s\n" % (r, phase, ", %d transactions" % d["tx"] if phase == "run" else ""))
        for (op, st), v in sorted(agg.items(), key=lambda kv: (kv[0][0], -kv[1])):
            txt.write("%7d  %-8s %s\n" % (v, op, st))
