#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Record pgbench.trace: a short pgbench run on a foliofs mount.

How tests/sim-golden/pgbench.trace was made (run once, as root, with
PostgreSQL installed; not part of the test suite):

    cd tests && FOLIOFS=../build/foliofs /usr/bin/python3 sim-golden/record-pgbench.py OUT

initdb and pgbench -i -s 1 run unrecorded; then `foliofsctl trace start`,
pgbench -c 2 -j 2 -t 150 (simple update), a CHECKPOINT, `foliofsctl trace
stop`.  The trace is what the golden replays use; recording it again gives a
different one (timing), so the expected outputs must be regenerated with it.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import util  # noqa: E402
from pgutil import Cluster, pg_bindir_or_skip  # noqa: E402

CTL = os.path.join(os.path.dirname(os.path.abspath(util.FOLIOFS)), 'tools', 'foliofsctl')


def main():
    out = os.path.abspath(sys.argv[1])
    user = util.test_user() if os.geteuid() == 0 else None
    c = Cluster(user, pg_bindir_or_skip())
    ok = False
    try:
        c.mount_fs()
        c.initdb()
        c.start()
        c.pg.run('pgbench', '-i', '-s', '1', *c.conn_args(), 'postgres', timeout=120)
        c.psql('CHECKPOINT')
        tmp = os.path.join(c.top, 'pgbench.trace')
        subprocess.run([CTL, 'trace', c.mnt, 'start', tmp], check=True,
                       preexec_fn=util._preexec(user))
        c.pg.run('pgbench', '-N', '-c', '2', '-j', '2', '-t', '150', *c.conn_args(),
                 'postgres', timeout=300)
        c.psql('CHECKPOINT')
        subprocess.run([CTL, 'trace', c.mnt, 'stop'], check=True,
                       preexec_fn=util._preexec(user))
        with open(tmp, 'rb') as src, open(out, 'wb') as dst:
            dst.write(src.read())
        c.stop()
        c.umount_clean()
        ok = True
    finally:
        c.cleanup(ok)


if __name__ == '__main__':
    main()
