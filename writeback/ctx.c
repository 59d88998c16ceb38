// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ctx.c - the writeback context of one mount: configuration, the cache,
 * the file list, statistics and the fault switch.
 */
#include "wb_i.h"
#include "throttle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The settings, the throttler, and the flushers' threshold they imply. */
int wb_ctx_create_core(const struct bs_config *bs_cfg, const struct wb_config *cfg,
		       const struct bs_cache_ops *cache_ops, void *cache_arg,
		       int64_t now_ns, struct wb_ctx **out)
{
	const struct wb_throttle_policy *policy =
		wb_throttle_policy_find(cfg->throttle ? cfg->throttle : "bdp");
	struct wb_ctx *ctx;
	struct wb_throttle_limits l;
	int ret;

	if (!policy)
		return -EINVAL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->cfg = *cfg;
	/* Not owned: the fault is parsed by the caller, the policy kept instead. */
	ctx->cfg.fault = NULL;
	ctx->cfg.throttle = NULL;
	pthread_mutex_init(&ctx->files_lock, NULL);
	pthread_cond_init(&ctx->files_cond, NULL);
	list_init(&ctx->files);
	list_init(&ctx->dirty);
	pthread_mutex_init(&ctx->flush_lock, NULL);
	pthread_cond_init(&ctx->flush_cond, NULL);
	pthread_mutex_init(&ctx->fault_lock, NULL);
	pthread_mutex_init(&ctx->pool_look_lock, NULL);
	atomic_init(&ctx->expire_ms, cfg->dirty_expire_ms);
	atomic_init(&ctx->interval_ms, cfg->writeback_interval_ms);
	atomic_init(&ctx->old_flush_ns, now_ns);	/* as the kernel's wb_init() */
	ctx->io = cfg->backing_io;	/* wb_backing_init() may fall back */
	/* The mount's driver; the simulator sets its own (wb_ctx_set_engine). */
	wb_ctx_set_engine(ctx, &wb_backing_engine_ops, NULL);
	ret = bs_cache_create(bs_cfg, cache_ops, cache_arg ? cache_arg : ctx, &ctx->cache);
	if (!ret)
		ret = wb_tunables_create(ctx);
	if (!ret) {
		wb_tunables_publish(ctx, &l);
		ret = wb_throttle_create(policy, &l, now_ns, &ctx->throttle);
	if (!ret && cfg->throttle_set) {
		int64_t values[BS_PARAMS_MAX];

		bs_params_defaults(policy->params, policy->nr_params, values);
		for (unsigned int i = 0; i < policy->nr_params; i++) {
			if (cfg->throttle_set & (1u << i))
				values[i] = cfg->throttle_params[i];
		}
		wb_throttle_set_policy_params(ctx->throttle, policy, values);
	}
	}
	if (ret) {
		wb_ctx_destroy_core(ctx);
		return ret;
	}
	*out = ctx;
	return 0;
}

void wb_ctx_destroy_core(struct wb_ctx *ctx)
{
	/* The reader, if wb_backing_init() started one: no file is left to read. */
	wb_backing_exit(ctx);
	if (ctx->throttle)
		wb_throttle_destroy(ctx->throttle);
	wb_tunables_destroy(ctx);
	if (ctx->cache)
		bs_cache_destroy(ctx->cache);
	free(ctx->fault);
	pthread_mutex_destroy(&ctx->files_lock);
	pthread_cond_destroy(&ctx->files_cond);
	pthread_mutex_destroy(&ctx->flush_lock);
	pthread_cond_destroy(&ctx->flush_cond);
	pthread_mutex_destroy(&ctx->fault_lock);
	pthread_mutex_destroy(&ctx->pool_look_lock);
	free(ctx);
}

struct bs_cache *wb_ctx_cache(struct wb_ctx *ctx)
{
	return ctx->cache;
}

uint32_t wb_ctx_interval_ms(struct wb_ctx *ctx)
{
	return atomic_load(&ctx->interval_ms);
}

void wb_ctx_count_writes(struct wb_ctx *ctx, uint64_t ios, uint64_t bytes, uint64_t submits)
{
	if (ios)
		atomic_fetch_add(&ctx->backing_write_ios, ios);
	if (bytes)
		atomic_fetch_add(&ctx->backing_write_bytes, bytes);
	if (submits)
		atomic_fetch_add(&ctx->backing_write_submits, submits);
}

int wb_ctx_create(const struct bs_config *bs_cfg, const struct wb_config *cfg,
		  struct wb_ctx **out)
{
	static const struct bs_cache_ops cache_ops = { .need_clean = wb_need_clean };
	struct wb_ctx *ctx;
	char err[256];
	int ret;

	ret = wb_ctx_create_core(bs_cfg, cfg, &cache_ops, NULL, wb_now_ns(), &ctx);
	if (ret)
		return ret;
	if (cfg->fault)
		ret = wb_ctx_set_fault(ctx, cfg->fault, err, sizeof(err));
	if (!ret)
		ret = wb_backing_init(ctx);
	if (!ret)
		ret = wb_flushers_start(ctx);
	if (!ret) {
		ret = wb_statslog_start(ctx);
		if (ret)
			wb_flushers_stop(ctx);
	}
	if (ret) {
		wb_ctx_destroy_core(ctx);
		return ret;
	}
	*out = ctx;
	return 0;
}

unsigned int wb_ctx_destroy(struct wb_ctx *ctx)
{
	unsigned int lost;

	wb_flushers_stop(ctx);
	/*
	 * Files kept because their data could not be written (wb_file_free
	 * failed): a last try, then they go anyway, counted as lost.
	 */
	for (struct wb_file *wbf; (wbf = wb_files_first(ctx));) {
		int ret = wb_file_flush(wbf);

		if (ret) {
			wb_report(wbf, "giving up on unwritten data of", ret);
			atomic_fetch_add(&ctx->lost_files, 1);
		}
		wb_file_discard(wbf);
	}
	/* Its last line shows the state after everything was written. */
	wb_statslog_stop(ctx);
	lost = atomic_load(&ctx->lost_files);
	wb_ctx_destroy_core(ctx);
	return lost;
}

void wb_ctx_quiesce(struct wb_ctx *ctx)
{
	wb_flushers_stop(ctx);
}

int wb_ctx_check(struct wb_ctx *ctx)
{
	int ret = bs_cache_check(ctx->cache);
	int dirty = wb_dirty_check(ctx);

	return ret ? ret : dirty;
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

/* Append "name value\n" to @buf at *@used. */
static void put_stat(char *buf, size_t size, size_t *used, const char *name, uint64_t v)
{
	int n;

	if (*used >= size)
		return;
	n = snprintf(buf + *used, size - *used, "%s %llu\n", name, (unsigned long long)v);
	if (n > 0)
		*used += (size_t)n;
}

/* KB/s from pages/s, as the kernel's tracepoints report rates. */
#define KBPS(pages) ((pages) * (BS_PAGE_SIZE / 1024))
#define MS(ns) ((uint64_t)((ns) < 0 ? 0 : (ns) / 1000000))

size_t wb_ctx_stats(struct wb_ctx *ctx, char *buf, size_t size)
{
	const struct bs_config *cfg = bs_cache_config(ctx->cache);
	struct wb_throttle_stats ts;
	struct bs_stats st;
	size_t used = 0;

	/* Reading the stats must not move the estimates: no update here. */
	wb_throttle_stats(ctx->throttle, &ts);
	bs_cache_stats(ctx->cache, &st);
	put_stat(buf, size, &used, "nr_dirty", st.nr_dirty);
	put_stat(buf, size, &used, "nr_dirtied", st.nr_dirtied);
	put_stat(buf, size, &used, "nr_written", st.nr_written);
	put_stat(buf, size, &used, "nr_writeback", st.nr_writeback);
	put_stat(buf, size, &used, "nr_discharged", st.nr_discharged);
	put_stat(buf, size, &used, "nr_reclaimable", st.nr_reclaimable);
	put_stat(buf, size, &used, "wb_budget_pages", st.wb_budget_pages);
	put_stat(buf, size, &used, "wb_dirty_pages_written", st.wb_dirty_pages_written);
	put_stat(buf, size, &used, "dirty_bytes_exact", st.dirty_bytes_exact);
	put_stat(buf, size, &used, "writeback_bytes", st.writeback_bytes);
	put_stat(buf, size, &used, "pinned_bytes", st.pinned_bytes);
	put_stat(buf, size, &used, "unsynced_bytes", st.unsynced_bytes);
	put_stat(buf, size, &used, "app_write_bytes", st.app_write_bytes);
	put_stat(buf, size, &used, "app_read_bytes", st.app_read_bytes);
	put_stat(buf, size, &used, "backing_read_bytes", st.backing_read_bytes);
	put_stat(buf, size, &used, "backing_read_ios", st.backing_read_ios);
	put_stat(buf, size, &used, "ra_pages", st.ra_pages);
	put_stat(buf, size, &used, "ra_ios", st.ra_ios);
	put_stat(buf, size, &used, "ra_async_ios", st.ra_async_ios);
	put_stat(buf, size, &used, "backing_write_bytes", atomic_load(&ctx->backing_write_bytes));
	put_stat(buf, size, &used, "backing_write_ios", atomic_load(&ctx->backing_write_ios));
	put_stat(buf, size, &used, "backing_write_submits", atomic_load(&ctx->backing_write_submits));
	put_stat(buf, size, &used, "wb_errors", atomic_load(&ctx->wb_errors));
	put_stat(buf, size, &used, "wb_retries", atomic_load(&ctx->wb_retries));
	put_stat(buf, size, &used, "faults_injected", atomic_load(&ctx->faults_injected));
	put_stat(buf, size, &used, "flusher_passes", atomic_load(&ctx->flusher_passes));
	put_stat(buf, size, &used, "dirty_thresh", ts.limits.thresh);
	put_stat(buf, size, &used, "bg_thresh", ts.limits.bg_thresh);
	put_stat(buf, size, &used, "dirty_limit", ts.dirty_limit);
	put_stat(buf, size, &used, "setpoint", ts.setpoint);
	put_stat(buf, size, &used, "pinned_thresh", ts.limits.pinned_thresh);
	put_stat(buf, size, &used, "pinned_limit", ts.pinned_limit);
	put_stat(buf, size, &used, "write_bw", KBPS(ts.write_bw));
	put_stat(buf, size, &used, "avg_write_bw", KBPS(ts.avg_write_bw));
	put_stat(buf, size, &used, "dirty_rate", KBPS(ts.dirty_rate));
	put_stat(buf, size, &used, "dirty_ratelimit", KBPS(ts.dirty_ratelimit));
	put_stat(buf, size, &used, "balanced_dirty_ratelimit", KBPS(ts.balanced_dirty_ratelimit));
	put_stat(buf, size, &used, "task_ratelimit", KBPS(ts.task_ratelimit));
	put_stat(buf, size, &used, "pos_ratio", ts.pos_ratio);
	put_stat(buf, size, &used, "throttle_events", ts.throttle_events);
	put_stat(buf, size, &used, "throttle_ms", MS((int64_t)ts.throttle_ns));
	put_stat(buf, size, &used, "throttled_writers", ts.throttled_writers);
	put_stat(buf, size, &used, "pause", MS(ts.pause_ns));
	put_stat(buf, size, &used, "period", MS(ts.period_ns));
	put_stat(buf, size, &used, "think", MS(ts.think_ns));
	put_stat(buf, size, &used, "cache_bytes", st.cache_bytes);
	put_stat(buf, size, &used, "cache_size", cfg->cache_size);
	put_stat(buf, size, &used, "pool_bytes", st.pool_bytes);
	put_stat(buf, size, &used, "pool_hits", st.pool_hits);
	put_stat(buf, size, &used, "pool_misses", st.pool_misses);
	put_stat(buf, size, &used, "folios", st.folios);
	for (int i = 0; i < BS_NR_FOLIO_ORDERS; i++) {
		char name[24];

		snprintf(name, sizeof(name), "folios_%uk", 4u << i);
		put_stat(buf, size, &used, name, st.folios_order[i]);
	}
	put_stat(buf, size, &used, "reclaimed_folios", st.reclaimed_folios);
	for (int i = 0; i < BS_NR_FOLIO_ORDERS; i++) {
		static const char *const kinds[] = { "made", "reclaimed", "activated", "active" };
		const uint64_t *vals[] = { st.folios_made_order, st.reclaimed_order,
					   st.activated_order, st.active_order };

		for (unsigned int k = 0; k < 4; k++) {
			char name[32];

			snprintf(name, sizeof(name), "folios_%s_%uk", kinds[k], 4u << i);
			put_stat(buf, size, &used, name, vals[k][i]);
		}
	}
	put_stat(buf, size, &used, "active_bytes", st.active_bytes);
	put_stat(buf, size, &used, "inactive_bytes", st.inactive_bytes);
	put_stat(buf, size, &used, "seen_active_bytes", st.seen_active_bytes);
	put_stat(buf, size, &used, "seen_inactive_bytes", st.seen_inactive_bytes);
	put_stat(buf, size, &used, "activated_folios", st.activated_folios);
	put_stat(buf, size, &used, "rotated_folios", st.rotated_folios);
	put_stat(buf, size, &used, "deactivated_folios", st.deactivated_folios);
	put_stat(buf, size, &used, "activate_pages", st.activate_pages);
	put_stat(buf, size, &used, "deactivate_pages", st.deactivate_pages);
	put_stat(buf, size, &used, "workingset_refault", st.workingset_refault);
	put_stat(buf, size, &used, "workingset_activate", st.workingset_activate);
	put_stat(buf, size, &used, "reclaim_stalls", st.reclaim_stalls);
	put_stat(buf, size, &used, "full_events", st.full_events);
	put_stat(buf, size, &used, "block_size", cfg->block_size);
	put_stat(buf, size, &used, "folio_size", cfg->folio_size);
	put_stat(buf, size, &used, "backing_direct", ctx->cfg.backing_direct);
	if (used < size)
		used += wb_ctx_policy_stats(ctx, buf + used, size - used);
	return used < size ? used : size - 1;
}
