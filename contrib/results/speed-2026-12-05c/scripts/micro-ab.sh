#!/bin/bash
# micro-ab.sh BIN... : per binary, mount (cache=direct) a fresh backing directory, write 512 MiB with dd bs=8k, then 60,000 random 8 KiB reads and then writes in each of 2 Python threads; rounds (ROUNDS, default 3) with the binaries in turns; as root, scratch in /var/tmp/ab
rounds=${ROUNDS:-3}
for r in $(seq $rounds); do
for bin in "$@"; do
  mkdir -p /var/tmp/ab; d=/var/tmp/ab/m-$r-$(basename $(dirname $bin)); rm -rf $d; mkdir -p $d/b $d/m
  $bin $d/b $d/m -o cache=direct & sleep 0.5
  dd if=/dev/zero of=$d/m/f bs=8k count=65536 status=none; sync -f $d/m/f
  /usr/bin/python3 - $d/m/f $bin <<'PY'
import os,random,time,sys,threading
path=sys.argv[1]; n=512*1024*1024//8192
res={}
def work(kind, seed, out):
    fd=os.open(path,os.O_RDWR); r=random.Random(seed); buf=b'x'*8192
    offs=[r.randrange(n)*8192 for _ in range(60000)]
    t=time.perf_counter()
    if kind=='r':
        for o in offs: os.pread(fd,8192,o)
    else:
        for o in offs: os.pwrite(fd,buf,o)
    out.append(len(offs)/(time.perf_counter()-t)); os.close(fd)
line=[]
for kind in 'rw':
    out=[]; th=[threading.Thread(target=work,args=(kind,s,out)) for s in (1,2)]
    [t.start() for t in th]; [t.join() for t in th]
    line.append('%s %6.0f/s' % (kind, sum(out)))
print(sys.argv[2].split('/')[-2], *line)
PY
  fusermount3 -u $d/m; wait; rm -rf $d
done; done
