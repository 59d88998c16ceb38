// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * stream.c - a generator's records for a replay, in process, without a
 * trace file (sim.h: sim_gen_stream_open()).
 *
 * The generators (gen.c, pgbench.c) are loops that put their records into
 * a sink in trace order; a replay's feed wants them one at a time, as far
 * as its writers ask.  Rather than turn every loop of a generator inside
 * out, the generator runs as written in a thread of its own and the two
 * take turns: the generator fills a batch of SIM_GEN_BATCH records and
 * waits; the replay takes them one by one, and when the batch is empty
 * hands the turn back and waits.  Only one of them runs at any time, so
 * the replay still uses one core, and the records and their order are the
 * generator's whatever the scheduling: the replay is the same as of the
 * trace file the same spec makes (`foliofs-sim gen`).  A turn costs two
 * wake-ups, a few microseconds, once per batch.
 *
 * Closing before the generator has ended (a replay whose writers are all
 * done before the trace is: the records left would all be skipped) makes
 * the generator's next put fail with -ECANCELED, which ends it.
 */
#include "sim.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SIM_GEN_BATCH 16384u	/* records (56 bytes each in memory) */

struct sim_gen_stream {
	struct sim_sink sink;		/* the generator's: put() fills the batch */
	char *spec;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* signalled at each change of turn */
	/* whose turn it is; under lock.  The batch belongs to its holder. */
	bool gen_turn;
	bool ended;			/* the generator returned (ret, err) */
	bool stop;			/* the replay closed: the generator stops at its next put */
	int ret;
	char err[512];
	struct trace_rec *batch;	/* SIM_GEN_BATCH records */
	size_t nr, pos;			/* records in the batch; taken by the replay */
};

/* The generator hands the turn over and waits for it: false when the replay closed. */
static bool gen_yield(struct sim_gen_stream *gs)
{
	bool stop;

	pthread_mutex_lock(&gs->lock);
	gs->gen_turn = false;
	pthread_cond_broadcast(&gs->cond);
	while (!gs->gen_turn && !gs->stop)
		pthread_cond_wait(&gs->cond, &gs->lock);
	stop = gs->stop;
	pthread_mutex_unlock(&gs->lock);
	return !stop;
}

static int stream_put(struct sim_sink *sink, const struct trace_rec *rec)
{
	struct sim_gen_stream *gs = (struct sim_gen_stream *)sink;

	if (gs->nr == SIM_GEN_BATCH) {
		if (!gen_yield(gs))
			return -ECANCELED;
		gs->nr = 0;
	}
	gs->batch[gs->nr++] = *rec;
	return 0;
}

static void *gen_main(void *arg)
{
	struct sim_gen_stream *gs = arg;
	int ret;

	pthread_mutex_lock(&gs->lock);
	while (!gs->gen_turn && !gs->stop)
		pthread_cond_wait(&gs->cond, &gs->lock);
	pthread_mutex_unlock(&gs->lock);
	ret = gs->stop ? -ECANCELED : sim_gen_run(gs->spec, &gs->sink, gs->err, sizeof(gs->err));
	pthread_mutex_lock(&gs->lock);
	gs->ret = ret;
	gs->ended = true;
	gs->gen_turn = false;
	pthread_cond_broadcast(&gs->cond);
	pthread_mutex_unlock(&gs->lock);
	return NULL;
}

int sim_gen_stream_open(const char *spec, const struct sim_gen_warm *warm,
			struct sim_gen_stream **gsp, char *err, size_t errlen)
{
	struct sim_gen_stream *gs = calloc(1, sizeof(*gs));
	int ret;

	*gsp = NULL;
	if (!gs || !(gs->spec = strdup(spec)) ||
	    !(gs->batch = malloc(SIM_GEN_BATCH * sizeof(*gs->batch)))) {
		if (gs)
			free(gs->spec);
		free(gs);
		snprintf(err, errlen, "gen:%s: out of memory", spec);
		return -ENOMEM;
	}
	gs->sink.put = stream_put;
	gs->sink.warm = warm;
	pthread_mutex_init(&gs->lock, NULL);
	pthread_cond_init(&gs->cond, NULL);
	ret = -pthread_create(&gs->thread, NULL, gen_main, gs);
	if (ret) {
		snprintf(err, errlen, "gen:%s: no thread for the generator: %s", spec,
			 strerror(-ret));
		pthread_cond_destroy(&gs->cond);
		pthread_mutex_destroy(&gs->lock);
		free(gs->batch);
		free(gs->spec);
		free(gs);
		return ret;
	}
	*gsp = gs;
	return 0;
}

int sim_gen_stream_next(struct sim_gen_stream *gs, struct trace_rec *rec, char *err,
			size_t errlen)
{
	while (gs->pos == gs->nr) {
		if (gs->ended) {
			if (gs->ret && gs->ret != -ECANCELED)
				snprintf(err, errlen, "gen:%s: %s", gs->spec,
					 gs->err[0] ? gs->err : strerror(-gs->ret));
			return gs->ret;
		}
		/* the batch is taken: the generator's turn, until it has filled the next */
		pthread_mutex_lock(&gs->lock);
		gs->pos = 0;
		gs->nr = 0;
		gs->gen_turn = true;
		pthread_cond_broadcast(&gs->cond);
		while (gs->gen_turn)
			pthread_cond_wait(&gs->cond, &gs->lock);
		pthread_mutex_unlock(&gs->lock);
	}
	*rec = gs->batch[gs->pos++];
	return 1;
}

void sim_gen_stream_close(struct sim_gen_stream *gs)
{
	if (!gs)
		return;
	pthread_mutex_lock(&gs->lock);
	gs->stop = true;
	pthread_cond_broadcast(&gs->cond);
	pthread_mutex_unlock(&gs->lock);
	pthread_join(gs->thread, NULL);
	pthread_cond_destroy(&gs->cond);
	pthread_mutex_destroy(&gs->lock);
	free(gs->batch);
	free(gs->spec);
	free(gs);
}
