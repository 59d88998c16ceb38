#!/usr/bin/python3
"""sfr.py: what PostgreSQL's sync_file_range() hints do to the model, on
the kernel's own requests.

  sfr.py drop DIR NAME [OPTS]   DIR's kernel-io.trace without its sync_range
                                records, replayed with the ksim options (OPTS
                                added or replacing) into DIR/NAME, and the
                                error table of ksim (the trace as recorded)
                                beside it; FOLIOSIM as ksim.py's

DIR is a calibrate.py --sim-kernel output whose trace was recorded by a
kio.py that keeps sync_range records (2c5c13c on).
"""
import importlib.util
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, 'contrib', 'lib'))
import foliofs_trace  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    'ksim', os.path.join(REPO, 'contrib', 'results', 'ksim-2026-12-07', 'ksim.py'))
ksim = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ksim)

OP_AT = 24      # the op's byte in a record (trace/trace.h)


def drop_sync_range(src, dst):
    """SRC's records but its sync_range ones, into DST: how many dropped."""
    info = foliofs_trace.trace_info(src)
    if info['version'] != 2:
        raise ValueError('%s: trace version %d, not 2' % (src, info['version']))
    size, op = foliofs_trace.TRACE_REC.size, foliofs_trace.OP['sync_range']
    dropped = 0
    with open(src, 'rb') as f, open(dst, 'wb') as g:
        g.write(f.read(foliofs_trace.TRACE_HDR.size))
        while True:
            buf = f.read(size * 65536)
            if not buf:
                break
            keep = [buf[i:i + size] for i in range(0, len(buf), size)
                    if buf[i + OP_AT] != op]
            dropped += len(buf) // size - len(keep)
            g.write(b''.join(keep))
    return dropped


def drop(out, name, extra):
    with open(os.path.join(out, 'kernel.json')) as f:
        tr = json.load(f)['io_trace']
    if 'sync_range_records' not in tr:
        sys.exit('sfr.py: %s: its trace was recorded without sync_range records' % out)
    fd, path = tempfile.mkstemp(suffix='.trace', dir='/var/tmp')
    os.close(fd)
    try:
        print('sfr.py: %d sync_range records dropped' % drop_sync_range(tr['trace'], path),
              file=sys.stderr)
        ksim.replay(out, name, extra, trace=path)
    finally:
        os.unlink(path)


def main(argv):
    if len(argv) < 3 or argv[0] != 'drop':
        print(__doc__, file=sys.stderr)
        return 2
    drop(argv[1], argv[2], argv[3] if len(argv) > 3 else '')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
