#!/usr/bin/python3
"""The paced checkpointer against its recorded waits: one row per replay
output given (NAME=FILE.out, gen.out for the schedule), the seed's figures
and the checkpointer's lag.

    table.py GEN.out NAME=REPLAY.out...
"""
import gzip
import importlib.util
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = os.path.join(HERE, '..', '..', 'sim', 'pgbench-seed.py')


def load_seed():
    spec = importlib.util.spec_from_file_location('pgbench_seed', SEED)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read(path):
    with (gzip.open(path, 'rt') if path.endswith('.gz') else open(path)) as f:
        return f.read()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    seed = load_seed()
    gen = read(sys.argv[1])
    ckpt_pid = seed.schedule(gen)[-1][1] + 1     # after every iteration's clients
    print('| replay | mean tps | CV | iters 1-5 | iters 6-10 | charged/written | paused s '
          '(all clients) | txns skipped | written GiB | end s (virtual) | checkpointer '
          'span s, replayed / recorded |')
    print('|---|' + '---:|' * 10)
    for arg in sys.argv[2:]:
        name, path = arg.split('=', 1)
        text = read(path)
        writers, kv = seed.parse_replay(text)
        tps = [it['tps'] for it in kv['iters']]
        mean = statistics.mean(tps)
        half = len(tps) // 2
        end = next(float(line.split()[5]) for line in text.splitlines()
                   if line.startswith('# summary:'))
        ckpt = next(line.split() for line in text.splitlines()
                    if line.startswith('writer %d ' % ckpt_pid))
        done = sum(it['done'] for it in kv['iters'])
        skipped = sum(it['skipped'] for it in kv['iters'])
        due = done + skipped + sum(it['late'] for it in kv['iters'])
        print('| %s | %.0f | %.2f%% | %.0f | %.0f | x%.1f | %.0f | %d (%.1f%%) | %.1f | %.1f | '
              '%.1f / %.1f |' % (
                  name, mean, statistics.pstdev(tps) / mean * 100,
                  statistics.mean(tps[:half]), statistics.mean(tps[half:]),
                  kv['pages_charged'] * 4096 / max(1, kv['device_bytes']),
                  kv['pause_total_ms'] / 1000, skipped, skipped / due * 100,
                  kv['device_bytes'] / 2**30, end,
                  int(ckpt[2]) / float(ckpt[3]), int(ckpt[2]) / float(ckpt[4])))
    print()
    for arg in sys.argv[2:]:
        name, path = arg.split('=', 1)
        _, kv = seed.parse_replay(read(path))
        print('    %-14s %s' % (name + ':', ' '.join('%6.0f' % it['tps'] for it in kv['iters'])))


if __name__ == '__main__':
    main()
