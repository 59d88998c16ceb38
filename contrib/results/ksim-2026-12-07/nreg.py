import re, sys
def parse(path, big):
    out = []; cur = None
    for line in open(path):
        line = line.strip()
        m = re.match(r'scan at add (\d+)', line)
        if m: cur = {'at': int(m.group(1)), 'nreg': {}, 'added': {}}; out.append(cur); continue
        m = re.match(r'@nreg\[(\d+)\]: (-?\d+)', line)
        if m and cur is not None: cur['nreg'][int(m.group(1))] = int(m.group(2))
        m = re.match(r'@added\[(\d+)\]: (\d+)', line)
        if m and cur is not None: cur['added'][int(m.group(1))] = int(m.group(2))
    return out
for p in sys.argv[1:]:
    scans = parse(p, 0)
    print(p)
    for s in scans:
        top = sorted(s['nreg'].items(), key=lambda kv: -kv[1])[:3]
        print('  at %8d  2M added before %4d  0-order %6d  regions with small: %s' % (s['at'], s['added'].get(9, 0), s['added'].get(0, 0), top))
