// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ctx.c - the writeback context of one mount: configuration, the cache,
 * the file list, statistics and the fault switch.
 */
#include "wb_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void wb_config_default(struct wb_config *cfg)
{
	*cfg = (struct wb_config){
		.flushers = 2,
		.dirty_background_ratio = 10,
		.dirty_expire_ms = 30000,
		.writeback_interval_ms = 5000,
		.backing_io = WB_IO_URING,
		.max_io = 1u << 20,
	};
}

int wb_config_check(const struct wb_config *cfg, char *err, size_t errlen)
{
	struct wb_fault f;

	if (cfg->flushers > 64) {
		snprintf(err, errlen, "flushers=%u: out of range [0, 64]", cfg->flushers);
		return -EINVAL;
	}
	if (cfg->dirty_background_ratio > 100) {
		snprintf(err, errlen, "dirty_background_ratio=%u: out of range [0, 100]",
			 cfg->dirty_background_ratio);
		return -EINVAL;
	}
	if (cfg->max_io < 4096 || (cfg->max_io & (cfg->max_io - 1))) {
		snprintf(err, errlen, "max_io=%u: a power of two, at least 4096", cfg->max_io);
		return -EINVAL;
	}
	if (cfg->fault && *cfg->fault && strcmp(cfg->fault, "off") != 0 &&
	    wb_fault_parse(cfg->fault, &f, err, errlen))
		return -EINVAL;
	return 0;
}

const char *wb_backing_io_name(enum wb_backing_io io)
{
	switch (io) {
	case WB_IO_URING:
		return "uring";
	case WB_IO_PSYNC:
		return "psync";
	default:
		return "null";
	}
}

static uint64_t bg_thresh_of(const struct wb_config *cfg, const struct bs_config *bs)
{
	if (cfg->dirty_background_bytes)
		return cfg->dirty_background_bytes;
	return bs->cache_size / 100 * cfg->dirty_background_ratio;
}

int wb_ctx_create(const struct bs_config *bs_cfg, const struct wb_config *cfg,
		  struct wb_ctx **out)
{
	static const struct bs_cache_ops cache_ops = { .need_clean = wb_need_clean };
	struct wb_ctx *ctx = calloc(1, sizeof(*ctx));
	char err[256];
	int ret;

	if (!ctx)
		return -ENOMEM;
	ctx->cfg = *cfg;
	ctx->cfg.fault = NULL;
	pthread_mutex_init(&ctx->files_lock, NULL);
	pthread_cond_init(&ctx->files_cond, NULL);
	pthread_mutex_init(&ctx->flush_lock, NULL);
	pthread_cond_init(&ctx->flush_cond, NULL);
	pthread_mutex_init(&ctx->fault_lock, NULL);
	atomic_init(&ctx->bg_thresh, bg_thresh_of(cfg, bs_cfg));
	atomic_init(&ctx->expire_ms, cfg->dirty_expire_ms);
	atomic_init(&ctx->interval_ms, cfg->writeback_interval_ms);
	ret = bs_cache_create(bs_cfg, &cache_ops, ctx, &ctx->cache);
	if (!ret && cfg->fault)
		ret = wb_ctx_set_fault(ctx, cfg->fault, err, sizeof(err));
	if (!ret)
		ret = wb_backing_init(ctx);
	if (!ret)
		ret = wb_flushers_start(ctx);
	if (ret) {
		bs_cache_destroy(ctx->cache);
		free(ctx->fault);
		free(ctx);
		return ret;
	}
	*out = ctx;
	return 0;
}

unsigned int wb_ctx_destroy(struct wb_ctx *ctx)
{
	unsigned int lost;

	wb_flushers_stop(ctx);
	/* Files kept because their data could not be written: a last try. */
	while (ctx->files)
		wb_file_destroy(ctx->files, true);
	lost = atomic_load(&ctx->lost_files);
	wb_backing_exit(ctx);
	bs_cache_destroy(ctx->cache);
	free(ctx->fault);
	pthread_mutex_destroy(&ctx->files_lock);
	pthread_cond_destroy(&ctx->files_cond);
	pthread_mutex_destroy(&ctx->flush_lock);
	pthread_cond_destroy(&ctx->flush_cond);
	pthread_mutex_destroy(&ctx->fault_lock);
	free(ctx);
	return lost;
}

int wb_ctx_check(struct wb_ctx *ctx)
{
	return bs_cache_check(ctx->cache);
}

int wb_ctx_set_fault(struct wb_ctx *ctx, const char *spec, char *err, size_t errlen)
{
	struct wb_fault *f = NULL, *old;

	if (*spec && strcmp(spec, "off") != 0) {
		f = malloc(sizeof(*f));
		if (!f)
			return -ENOMEM;
		if (wb_fault_parse(spec, f, err, errlen)) {
			free(f);
			return -EINVAL;
		}
	}
	pthread_mutex_lock(&ctx->fault_lock);
	old = ctx->fault;
	ctx->fault = f;
	atomic_store(&ctx->fault_on, f != NULL);
	pthread_mutex_unlock(&ctx->fault_lock);
	free(old);
	return 0;
}

void wb_ctx_get_fault(struct wb_ctx *ctx, char *buf, size_t len)
{
	pthread_mutex_lock(&ctx->fault_lock);
	wb_fault_format(ctx->fault, buf, len);
	pthread_mutex_unlock(&ctx->fault_lock);
}

size_t wb_ctx_stats(struct wb_ctx *ctx, char *buf, size_t size)
{
	const struct bs_config *cfg = bs_cache_config(ctx->cache);
	struct bs_stats st;
	int n;

	bs_cache_stats(ctx->cache, &st);
	n = snprintf(buf, size,
		     "nr_dirty %llu\n" "nr_dirtied %llu\n" "nr_written %llu\n"
		     "dirty_bytes_exact %llu\n" "writeback_bytes %llu\n"
		     "pinned_bytes %llu\n" "app_write_bytes %llu\n"
		     "app_read_bytes %llu\n" "backing_read_bytes %llu\n"
		     "backing_read_ios %llu\n" "backing_write_bytes %llu\n"
		     "backing_write_ios %llu\n" "backing_write_submits %llu\n"
		     "wb_errors %llu\n" "wb_retries %llu\n" "faults_injected %llu\n"
		     "flusher_passes %llu\n" "bg_thresh %llu\n"
		     "cache_bytes %llu\n" "cache_size %llu\n" "folios %llu\n"
		     "reclaimed_folios %llu\n" "reclaim_stalls %llu\n"
		     "block_size %u\n" "folio_size %u\n",
		     (unsigned long long)st.nr_dirty, (unsigned long long)st.nr_dirtied,
		     (unsigned long long)st.nr_written,
		     (unsigned long long)st.dirty_bytes_exact,
		     (unsigned long long)st.writeback_bytes,
		     (unsigned long long)st.pinned_bytes,
		     (unsigned long long)st.app_write_bytes,
		     (unsigned long long)st.app_read_bytes,
		     (unsigned long long)st.backing_read_bytes,
		     (unsigned long long)st.backing_read_ios,
		     (unsigned long long)atomic_load(&ctx->backing_write_bytes),
		     (unsigned long long)atomic_load(&ctx->backing_write_ios),
		     (unsigned long long)atomic_load(&ctx->backing_write_submits),
		     (unsigned long long)atomic_load(&ctx->wb_errors),
		     (unsigned long long)atomic_load(&ctx->wb_retries),
		     (unsigned long long)atomic_load(&ctx->faults_injected),
		     (unsigned long long)atomic_load(&ctx->flusher_passes),
		     (unsigned long long)(atomic_load(&ctx->bg_thresh) >> 12),
		     (unsigned long long)st.cache_bytes,
		     (unsigned long long)cfg->cache_size, (unsigned long long)st.folios,
		     (unsigned long long)st.reclaimed_folios,
		     (unsigned long long)st.reclaim_stalls, cfg->block_size,
		     cfg->folio_size);
	if (n < 0)
		return 0;
	return (size_t)n < size ? (size_t)n : size - 1;
}
