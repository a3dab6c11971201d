/* threads.c -- several threads; a thread's paths start at its start
 * routine.
 *
 * main starts four `worker` threads and one `helper` thread, does its own
 * work meanwhile, and joins them. Even workers run stage_a -> work_leaf,
 * odd ones stage_b -> work_leaf, all of them stage_a -> mix_leaf once.
 * Each thread writes only its own result slot, so the output does not
 * depend on scheduling.
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;main_work
 * worker;stage_a;work_leaf
 * worker;stage_b;work_leaf
 * worker;stage_a;mix_leaf
 * helper;helper_leaf
 *
 * ICPP-EXPECT
 * exit 0
 * stdout threads checksum=9bf151b5ab1f5f33
 */
#include <pthread.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

#define NWORKERS 4

struct job {
	unsigned long id;	/* thread index, 0..NWORKERS-1 */
	unsigned long n;	/* leaf loop length */
	unsigned long result;	/* written by the thread */
};

NOIPA unsigned long work_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		CORPUS_MIX(x);
	return x;
}

NOIPA unsigned long mix_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x ^= (x << 9) + (x >> 7) + i;
	return x;
}

/* mode 0: work, mode 1: mix. */
NOIPA unsigned long stage_a(unsigned long n, unsigned long x, int mode)
{
	unsigned long r = mode ? mix_leaf(n, x) : work_leaf(n, x);

	CORPUS_KEEP(r);
	return r + 1;
}

NOIPA unsigned long stage_b(unsigned long n, unsigned long x)
{
	unsigned long r = work_leaf(n, x ^ 0xabc);

	CORPUS_KEEP(r);
	return r + 2;
}

NOIPA void *worker(void *arg)
{
	struct job *job = arg;
	unsigned long r;

	if (job->id % 2 == 0)
		r = stage_a(job->n, job->id, 0);
	else
		r = stage_b(job->n, job->id);
	r ^= stage_a(job->n / 2, r, 1);
	job->result = r;
	return NULL;
}

NOIPA unsigned long helper_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x += (x << 4) ^ (x >> 12) ^ i;
	return x;
}

NOIPA void *helper(void *arg)
{
	struct job *job = arg;

	job->result = helper_leaf(job->n, 99);
	return NULL;
}

NOIPA unsigned long main_work(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x ^= (x >> 3) + (x << 17) + i;
	return x;
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long n = CORPUS_UNIT * 4 * (unsigned long)scale, sum;
	struct job jobs[NWORKERS + 1];
	pthread_t tids[NWORKERS + 1];

	for (int i = 0; i <= NWORKERS; i++) {
		jobs[i].id = (unsigned long)i;
		jobs[i].n = n;
		jobs[i].result = 0;
		if (pthread_create(&tids[i], NULL, i < NWORKERS ? worker : helper,
				   &jobs[i]) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	sum = main_work(n * 2, 1);
	for (int i = 0; i <= NWORKERS; i++) {
		pthread_join(tids[i], NULL);
		sum = sum * 31 + jobs[i].result;
	}
	printf("threads checksum=%016lx\n", sum);
	return 0;
}
