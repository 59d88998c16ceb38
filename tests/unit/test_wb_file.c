// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Model-based test of the data path (writeback/wb_file.c): random reads,
 * writes, truncates, punches, zero ranges, copies and fsyncs on a real
 * file against a shadow byte array, and writes cut as the kernel cuts
 * FUSE requests (wb_write_cut, the split tail) with other operations
 * between the pieces.  A failing seed is printed and can be replayed with
 * WB_TEST_SEED=N.
 */
#include "writeback.h"
#include "blockstate.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SIZE (4u << 20)

static uint64_t rng_state;

static uint64_t rnd(void)
{
	return t_xorshift(&rng_state);
}

static size_t rnd_below(size_t n)
{
	return n ? rnd() % n : 0;
}

struct model {
	unsigned char *bytes;
	size_t size;
};

static unsigned long long cur_seed;
static int cur_step;

#define M_CHECK(cond)                                                     \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "seed %llu step %d: %s:%d: %s\n", \
				cur_seed, cur_step, __FILE__, __LINE__,   \
				#cond);                                   \
			exit(T_EXIT_FAIL);                                \
		}                                                         \
	} while (0)

static void model_resize(struct model *m, size_t size)
{
	if (size > m->size)
		memset(m->bytes + m->size, 0, size - m->size);
	m->size = size;
}

static void check_all(struct wb_file *f, const struct model *m, unsigned char *buf)
{
	ssize_t n = wb_read(f, mem_thread_ra(), buf, MAX_SIZE + 4096, 0);

	M_CHECK(n == (ssize_t)m->size);
	M_CHECK(memcmp(buf, m->bytes, m->size) == 0);
}

static void step(struct wb_file *f, struct model *m, unsigned char *buf);

/*
 * A write cut into pieces at random points, as the kernel cuts a FUSE
 * write of an unaligned buffer: each piece but the last through
 * wb_write_cut(); now and then another operation between two pieces, or
 * the rest never sent (a short write).  The model takes each piece as
 * written when its call returns.
 */
static void cut_write(struct wb_file *f, struct model *m, unsigned char *buf)
{
	size_t off = rnd_below(MAX_SIZE), len = 1 + rnd_below(300000), done = 0;
	unsigned char *data = malloc(300000);

	M_CHECK(data != NULL);
	if (off + len > MAX_SIZE)
		len = MAX_SIZE - off;
	for (size_t i = 0; i < len; i++)
		data[i] = (unsigned char)rnd();
	while (done < len) {
		size_t piece = len - done;
		bool last;

		if (piece > 1 && rnd_below(4))
			piece = 1 + rnd_below(piece < 70000 ? piece : 70000);
		last = done + piece == len;
		M_CHECK((last ? wb_write : wb_write_cut)(f, data + done, piece,
							 (off_t)(off + done), NULL) ==
			(ssize_t)piece);
		if (off + done + piece > m->size)
			model_resize(m, off + done + piece);
		memcpy(m->bytes + off + done, data + done, piece);
		done += piece;
		if (!last && !rnd_below(6))
			step(f, m, buf);	/* anything, on the same file, between two pieces */
		if (!last && !rnd_below(20))
			break;			/* the rest never comes */
	}
	free(data);
}

static void step(struct wb_file *f, struct model *m, unsigned char *buf)
{
	size_t off = rnd_below(MAX_SIZE), len = 1 + rnd_below(rnd() & 1 ? 64 : 200000);
	ssize_t n;

	if (off + len > MAX_SIZE)
		len = MAX_SIZE - off;
	switch (rnd_below(9)) {
	case 8:
		cut_write(f, m, buf);
		break;
	case 0: case 1: case 2:	/* write */
		for (size_t i = 0; i < len; i++)
			buf[i] = (unsigned char)rnd();
		M_CHECK(wb_write(f, buf, len, (off_t)off, NULL) == (ssize_t)len);
		if (off + len > m->size)
			model_resize(m, off + len);
		memcpy(m->bytes + off, buf, len);
		break;
	case 3:	/* read */
		n = wb_read(f, mem_thread_ra(), buf, len, (off_t)off);
		M_CHECK(n == (ssize_t)(off >= m->size ? 0 :
				       (off + len > m->size ? m->size - off : len)));
		M_CHECK(memcmp(buf, m->bytes + off, n) == 0);
		break;
	case 4:	/* truncate */
		M_CHECK(wb_truncate(f, (off_t)off) == 0);
		model_resize(m, off);
		break;
	case 5:	/* punch or zero */
		if (rnd() & 1) {
			M_CHECK(wb_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					     (off_t)off, (off_t)len) == 0);
			if (off < m->size)
				memset(m->bytes + off, 0,
				       (off + len > m->size ? m->size : off + len) - off);
		} else {
			M_CHECK(wb_fallocate(f, FALLOC_FL_ZERO_RANGE, (off_t)off, (off_t)len) == 0);
			if (off + len > m->size)
				model_resize(m, off + len);
			memset(m->bytes + off, 0, len);
		}
		break;
	case 6: {	/* copy within the file, non-overlapping */
		size_t dst = rnd_below(MAX_SIZE - len);
		size_t avail = off >= m->size ? 0 :
			       (off + len > m->size ? m->size - off : len);

		n = wb_copy_range(f, NULL, (off_t)off, f, (off_t)dst, len);
		if ((dst < off ? off - dst : dst - off) < len) {
			M_CHECK(n == -EINVAL);
			break;
		}
		M_CHECK(n == (ssize_t)avail);
		if (avail && dst + avail > m->size)
			model_resize(m, dst + avail);
		memmove(m->bytes + dst, m->bytes + off, avail);
		break;
	}
	default:
		M_CHECK(wb_fsync(f, rnd() & 1, NULL) == 0);
		break;
	}
}

static struct wb_ctx *ctx;

/* Compare the backing file itself with the model (after a sync). */
static void check_backing(const char *path, const struct model *m, unsigned char *buf)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	M_CHECK(fd >= 0);
	n = pread(fd, buf, MAX_SIZE + 4096, 0);
	M_CHECK(n == (ssize_t)m->size);
	M_CHECK(memcmp(buf, m->bytes, m->size) == 0);
	close(fd);
}

static void run_seed(unsigned long long seed, int steps, unsigned char *buf,
		     struct model *m)
{
	char path[] = "/tmp/foliofs-wbtest-XXXXXX";
	struct wb_file *f;
	int fd = mkstemp(path);

	T_CHECK(fd >= 0);
	T_CHECK(wb_file_alloc(ctx, fd, WB_RDWR, &f) == 0);
	cur_seed = seed;
	rng_state = seed * 2654435761u + 1;
	m->size = 0;
	for (cur_step = 0; cur_step < steps; cur_step++) {
		step(f, m, buf);
		if (cur_step % 16 == 0)
			check_all(f, m, buf);
	}
	check_all(f, m, buf);
	M_CHECK(wb_fsync(f, false, NULL) == 0);
	check_backing(path, m, buf);
	T_CHECK(wb_file_free(f) == 0);
	check_backing(path, m, buf);
	unlink(path);
}

static void test_edges(void)
{
	char path[] = "/tmp/foliofs-wbtest-XXXXXX";
	struct wb_file *f;
	char b[16];
	int fd = mkstemp(path);

	T_CHECK(fd >= 0);
	unlink(path);
	T_CHECK(wb_file_alloc(ctx, fd, WB_RDWR, &f) == 0);
	T_CHECK(wb_file_access(f) == WB_RDWR);
	T_CHECK(wb_read(f, mem_thread_ra(), b, sizeof(b), 0) == 0);
	T_CHECK(wb_truncate(f, -1) == -EINVAL);
	T_CHECK(wb_fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 0, 4096) == -EOPNOTSUPP);
	T_CHECK(wb_fallocate(f, 0, 0, 0) == -EINVAL);
	T_CHECK(wb_fallocate(f, 0, INT64_MAX - 10, 100) == -EFBIG);
	T_CHECK(wb_lseek(f, 0, SEEK_SET) == -EINVAL);
	T_CHECK(wb_lseek(f, 0, SEEK_DATA) == -ENXIO);
	T_CHECK(wb_write(f, "x", 1, 1 << 20, NULL) == 1);
	T_CHECK(wb_lseek(f, 0, SEEK_HOLE) == 0);
	T_CHECK(wb_lseek(f, 0, SEEK_DATA) == (1 << 20) - ((1 << 20) % 4096));
	T_CHECK(wb_copy_range(f, NULL, 0, f, 10, 100) == -EINVAL);
	T_CHECK(wb_copy_range(f, NULL, -1, f, 10, 1) == -EINVAL);
	T_CHECK(wb_copy_range(f, NULL, 2 << 20, f, 0, 100) == 0);
	T_CHECK(wb_file_free(f) == 0);
}

static uint64_t stat_of(const char *name)
{
	char stats[8192], key[64];
	const char *p;

	wb_ctx_stats(ctx, stats, sizeof(stats));
	snprintf(key, sizeof(key), "\n%s ", name);
	p = strstr(stats, key);
	T_CHECK(p != NULL);
	return strtoull(p + strlen(key), NULL, 10);
}

/*
 * The split tail: a write cut inside a block of data that is on the
 * backing file but not cached is finished by the next piece without a
 * backing read; anything else that comes first reads the block and sees
 * the held bytes; a tail that cannot be applied (the read fails) stays
 * held, and the operations that need it fail until it can.
 */
static void test_split_tail(void)
{
	char path[] = "/tmp/foliofs-wbtest-XXXXXX";
	size_t size = 4u << 20, cut = (1u << 20) - 100;
	unsigned char *want = malloc(size), *got = malloc(size), *w = malloc(size);
	char err[256];
	struct wb_file *f;
	struct stat st;
	uint64_t reads;
	int fd = mkstemp(path);

	T_CHECK(fd >= 0 && want && got && w);
	for (size_t i = 0; i < size; i++)
		want[i] = (unsigned char)(i * 7 + 3);
	T_CHECK(pwrite(fd, want, size, 0) == (ssize_t)size);
	T_CHECK(wb_file_alloc(ctx, fd, WB_RDWR, &f) == 0);
	for (size_t i = 0; i < size; i++)
		w[i] = (unsigned char)(i * 13 + 1);

	/* Two pieces of 1 MiB at 0, cut 100 bytes short of a block: no read. */
	reads = stat_of("backing_read_bytes");
	T_CHECK(wb_write_cut(f, w, cut, 0, NULL) == (ssize_t)cut);
	T_CHECK(wb_write(f, w + cut, 100, (off_t)cut, NULL) == 100);
	T_CHECK(stat_of("backing_read_bytes") == reads);
	memcpy(want, w, 1u << 20);

	/* Three cut pieces in a row, then the last: still no read. */
	T_CHECK(wb_write_cut(f, w + (1u << 20), cut, 1 << 20, NULL) == (ssize_t)cut);
	T_CHECK(wb_write_cut(f, w + (1u << 20) + cut, 1u << 20,
			     (off_t)((1u << 20) + cut), NULL) == 1 << 20);
	T_CHECK(wb_write(f, w + (2u << 20) + cut, 100, (off_t)((2u << 20) + cut), NULL) == 100);
	T_CHECK(stat_of("backing_read_bytes") == reads);
	memcpy(want + (1u << 20), w + (1u << 20), 2u << 20);

	/* A read first: the block is read, the held bytes are there. */
	T_CHECK(wb_write_cut(f, w + (3u << 20), cut, 3 << 20, NULL) == (ssize_t)cut);
	memcpy(want + (3u << 20), w + (3u << 20), cut);
	T_CHECK(wb_read(f, mem_thread_ra(), got, 4096, (off_t)((3u << 20) + cut - 4000)) == 4096);
	T_CHECK(memcmp(got, want + (3u << 20) + cut - 4000, 4096) == 0);
	T_CHECK(stat_of("backing_read_bytes") > reads);
	T_CHECK(wb_read(f, mem_thread_ra(), got, size, 0) == (ssize_t)size);
	T_CHECK(memcmp(got, want, size) == 0);

	/* Everything reached the backing file. */
	T_CHECK(wb_fsync(f, true, NULL) == 0);
	T_CHECK(wb_file_free(f) == 0);	/* closes fd */
	fd = open(path, O_RDWR);
	T_CHECK(fd >= 0);
	T_CHECK(pread(fd, got, size, 0) == (ssize_t)size);
	T_CHECK(memcmp(got, want, size) == 0);

	/* The block's read fails: the tail stays held, and what needs it fails. */
	T_CHECK(wb_file_alloc(ctx, fd, WB_RDWR, &f) == 0);
	fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0);
	T_CHECK(wb_ctx_set_fault(ctx, "read:EIO", err, sizeof(err)) == 0);
	T_CHECK(wb_write_cut(f, w, cut, 0, NULL) == (ssize_t)cut);
	memcpy(want, w, cut);
	T_CHECK(wb_read(f, mem_thread_ra(), got, 4096, (off_t)cut - 4000) == -EIO);
	T_CHECK(wb_fsync(f, true, NULL) == -EIO);
	T_CHECK(wb_truncate(f, 1) == -EIO);
	T_CHECK(wb_ctx_set_fault(ctx, "off", err, sizeof(err)) == 0);
	T_CHECK(wb_fsync(f, true, NULL) == 0);
	T_CHECK(pread(fd, got, size, 0) == (ssize_t)size);
	T_CHECK(memcmp(got, want, size) == 0);
	close(fd);

	/* Past the end nothing needs reading: nothing is held. */
	T_CHECK(wb_write_cut(f, w, cut, (off_t)size, NULL) == (ssize_t)cut);
	memset(&st, 0, sizeof(st));
	wb_file_fix_stat(f, &st);
	T_CHECK(st.st_size == (off_t)(size + cut));
	T_CHECK(wb_file_free(f) == 0);
	fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0);
	T_CHECK(pread(fd, got, size, (off_t)size) == (ssize_t)cut);
	T_CHECK(memcmp(got, w, cut) == 0);
	close(fd);
	unlink(path);
	free(want);
	free(got);
	free(w);
}

/*
 * Truncate racing the size fix-up at the end of a writeback pass: in each
 * round one thread truncates (to a larger, then a smaller size) while
 * another runs passes back to back until the truncate has returned
 * (SEEK_DATA writes back first, and a complete pass sets the backing
 * file's size to the cache's).  Once both are done the backing file must
 * have the size truncate set.  A pass used to read the cache's size
 * before the truncate stored it, then set the backing file back to that
 * old size.
 */
#define RACE_ROUNDS 5000

static pthread_barrier_t race_barrier;

struct race {
	struct wb_file *f;
	int rounds;
	atomic_bool truncated;		/* this round's truncate has returned */
};

static void *race_pass(void *arg)
{
	struct race *r = arg;

	for (int i = 0; i < r->rounds; i++) {
		pthread_barrier_wait(&race_barrier);
		while (!atomic_load(&r->truncated))
			wb_lseek(r->f, 0, SEEK_DATA);	/* -ENXIO past the size: fine */
		pthread_barrier_wait(&race_barrier);
	}
	return NULL;
}

static void test_truncate_vs_size_fixup(void)
{
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 64 << 10, .cache_size = 1 << 20,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("fixed"),
	};
	char path[] = "/tmp/foliofs-wbtest-XXXXXX";
	struct wb_config wcfg;
	struct wb_ctx *rctx;
	struct race r = { .rounds = RACE_ROUNDS, .truncated = false };
	int fd = mkstemp(path), bad = 0;
	pthread_t thr;

	wb_config_default(&wcfg);
	wcfg.flushers = 0;
	T_CHECK(fd >= 0);
	T_CHECK(wb_ctx_create(&cfg, &wcfg, &rctx) == 0);
	T_CHECK(wb_file_alloc(rctx, fd, WB_RDWR, &r.f) == 0);
	T_CHECK(pthread_barrier_init(&race_barrier, NULL, 2) == 0);
	T_CHECK(pthread_create(&thr, NULL, race_pass, &r) == 0);
	for (int i = 0; i < r.rounds; i++) {
		off_t size = i % 2 ? 4096 : 1 << 20;
		struct stat st;

		atomic_store(&r.truncated, false);
		pthread_barrier_wait(&race_barrier);
		T_CHECK(wb_truncate(r.f, size) == 0);
		atomic_store(&r.truncated, true);
		pthread_barrier_wait(&race_barrier);
		T_CHECK(stat(path, &st) == 0);
		if (st.st_size != size && !bad++)
			fprintf(stderr, "round %d: truncated to %lld, the backing file has %lld bytes\n",
				i, (long long)size, (long long)st.st_size);
	}
	T_CHECK(pthread_join(thr, NULL) == 0);
	pthread_barrier_destroy(&race_barrier);
	T_CHECK(wb_file_free(r.f) == 0);
	T_CHECK(wb_ctx_destroy(rctx) == 0);
	unlink(path);
	if (bad)
		fprintf(stderr, "%d of %d rounds left the backing file at the wrong size\n",
			bad, r.rounds);
	T_CHECK(!bad);
}

int main(void)
{
	unsigned char *buf = malloc(MAX_SIZE + 4096);
	struct model m = { .bytes = calloc(1, MAX_SIZE) };
	const char *env = getenv("WB_TEST_SEED");

	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 64 << 10, .cache_size = 1 << 20,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("ramp"),
		/*
		 * check_all() reads from 0: readahead windows, started on the
		 * io_uring reader, race the flushers and the next steps.
		 */
		.readahead_kb = 256,
	};

	struct wb_config wcfg;
	char stats[8192];
	const char *ra;

	/* Flushers with a tiny threshold and interval race the test's own ops. */
	wb_config_default(&wcfg);
	wcfg.dirty_background_bytes = 64 << 10;
	wcfg.writeback_interval_ms = 5;
	wcfg.dirty_expire_ms = 10;
	T_CHECK(buf && m.bytes);
	test_truncate_vs_size_fixup();
	T_CHECK(wb_ctx_create(&cfg, &wcfg, &ctx) == 0);
	test_edges();
	test_split_tail();
	if (env) {
		run_seed(strtoull(env, NULL, 10), 2000, buf, &m);
	} else {
		for (unsigned long long seed = 1; seed <= 8; seed++)
			run_seed(seed, 600, buf, &m);
	}
	wb_ctx_stats(ctx, stats, sizeof(stats));
	ra = strstr(stats, "\nra_async_ios ");
	T_CHECK(ra && strtoull(ra + 14, NULL, 10) > 0);
	T_CHECK(wb_ctx_destroy(ctx) == 0);
	free(buf);
	free(m.bytes);
	return T_EXIT_PASS;
}
