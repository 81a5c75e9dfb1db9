/* test-inflight.c - unit tests of the record of requests in progress
 * (src/inflight.c) on a real memfd: what a successor finds after a server
 * "dies" (its record freed without answering), read buffers the kernel
 * filled behind a dead reader's back, the replay limit.  The whole path,
 * with servers killed under load, is tested on real mounts
 * (tests/test_keeper.py).
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <glib.h>
#include <linux/fuse.h>

#include "powerfs/inflight.h"

struct fixture {
	int memfd;
	int pipe[2];
};

static void setup(struct fixture *f, gconstpointer data)
{
	(void)data;
	f->memfd = memfd_create("test-inflight", MFD_CLOEXEC);
	g_assert_cmpint(f->memfd, >=, 0);
	g_assert_cmpint(pipe(f->pipe), ==, 0);
}

static void teardown(struct fixture *f, gconstpointer data)
{
	(void)data;
	close(f->memfd);
	close(f->pipe[0]);
	close(f->pipe[1]);
}

/* A request as the kernel sends it: header, then len - 40 bytes. */
static void make_request(void *out, guint32 len, guint32 opcode,
			 guint64 unique)
{
	struct fuse_in_header *h = out;

	memset(out, 'x', len);
	*h = (struct fuse_in_header){ .len = len, .opcode = opcode,
				      .unique = unique, .nodeid = 1 };
}

/* The kernel hands a request to reader 0: through a pipe, into its read
 * buffer in the record. */
static void deliver(struct fixture *f, struct pf_inflight *in, guint32 len,
		    guint32 opcode, guint64 unique)
{
	char req[256];
	gsize size;
	void *buf = pf_inflight_read_buffer(in, 0, &size);

	g_assert_nonnull(buf);
	g_assert_cmpuint(len, <=, sizeof(req));
	make_request(req, len, opcode, unique);
	g_assert_cmpint(write(f->pipe[1], req, len), ==, len);
	g_assert_cmpint(pf_inflight_read(in, f->pipe[0], buf, size), ==, len);
}

static struct pf_inflight *open_left(struct fixture *f, GPtrArray **left,
				     GArray **refused)
{
	struct pf_inflight *in = pf_inflight_open(f->memfd, "t", left,
						  refused);

	g_assert_nonnull(in);
	return in;
}

static guint64 left_unique(GPtrArray *left, guint i)
{
	const struct fuse_in_header *h = g_bytes_get_data(left->pdata[i],
							  NULL);

	return h->unique;
}

static void free_all(struct pf_inflight *in, GPtrArray *left,
		     GArray *refused)
{
	pf_inflight_free(in);
	g_ptr_array_unref(left);
	g_array_unref(refused);
}

/* Answered requests are gone; unanswered ones come back, oldest first,
 * whole; FORGET (no answer expected) is never kept. */
static void test_answered_and_not(struct fixture *f, gconstpointer data)
{
	GPtrArray *left;
	GArray *refused;
	struct pf_inflight *in = open_left(f, &left, &refused);
	gsize len;

	(void)data;
	g_assert_cmpuint(left->len, ==, 0);
	free_all(in, left, refused);

	in = open_left(f, &left, &refused);
	deliver(f, in, 80, FUSE_READ, 10);	/* parked */
	pf_inflight_processed(in, 10);
	deliver(f, in, 60, FUSE_LOOKUP, 12);	/* answered at once */
	pf_inflight_answered(in, 12);
	pf_inflight_processed(in, 12);
	deliver(f, in, 84, FUSE_WRITE, 8);	/* older, still processing */
	deliver(f, in, 48, FUSE_FORGET, 14);
	free_all(in, left, refused);		/* the server dies */

	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 2);
	g_assert_cmpuint(refused->len, ==, 0);
	g_assert_cmpuint(left_unique(left, 0), ==, 8);
	g_assert_cmpuint(left_unique(left, 1), ==, 10);
	g_bytes_get_data(left->pdata[0], &len);
	g_assert_cmpuint(len, ==, 84);
	/* Answered by the successor: gone for the next one. */
	pf_inflight_answered(in, 8);
	pf_inflight_answered(in, 10);
	free_all(in, left, refused);
	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 0);
	free_all(in, left, refused);
}

/* The kernel copied a request into the read buffer and the reader never
 * returned from read(2): the successor finds it there, once. */
static void test_unseen_in_read_buffer(struct fixture *f, gconstpointer data)
{
	GPtrArray *left;
	GArray *refused;
	struct pf_inflight *in = open_left(f, &left, &refused);
	gsize size;
	void *buf;

	(void)data;
	deliver(f, in, 80, FUSE_READ, 20);
	pf_inflight_answered(in, 20);
	pf_inflight_processed(in, 20);
	/* Behind the reader's back, as the kernel's copy would land. */
	buf = pf_inflight_read_buffer(in, 0, &size);
	make_request(buf, 72, FUSE_OPEN, 22);
	free_all(in, left, refused);

	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 1);
	g_assert_cmpuint(left_unique(left, 0), ==, 22);
	free_all(in, left, refused);	/* dies again before answering */

	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 1);	/* from its slot now */
	g_assert_cmpuint(left_unique(left, 0), ==, 22);
	pf_inflight_answered(in, 22);
	free_all(in, left, refused);
	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 0);
	g_assert_null(pf_inflight_take_unseen_init(in));
	/* A connection's first server dies inside the read of INIT. */
	buf = pf_inflight_read_buffer(in, 0, &size);
	make_request(buf, 104, FUSE_INIT, 2);
	free_all(in, left, refused);
	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 0);
	{
		g_autoptr(GBytes) init = pf_inflight_take_unseen_init(in);
		const struct fuse_in_header *h;

		g_assert_nonnull(init);
		h = g_bytes_get_data(init, &size);
		g_assert_cmpuint(size, ==, 104);
		g_assert_cmpuint(h->opcode, ==, FUSE_INIT);
	}
	free_all(in, left, refused);
}

/* A request whose processing kills every server: processed again twice,
 * then refused; one that only waits is processed again at every hand-over
 * without limit; one left but not processed again (its server died first)
 * is not counted; forget_all drops everything. */
static void test_replay_limit(struct fixture *f, gconstpointer data)
{
	GPtrArray *left;
	GArray *refused;
	struct pf_inflight *in = open_left(f, &left, &refused);

	(void)data;
	deliver(f, in, 84, FUSE_WRITE, 30);	/* kills the server */
	deliver(f, in, 80, FUSE_READ, 32);	/* only waits */
	pf_inflight_processed(in, 32);
	free_all(in, left, refused);
	for (guint round = 1; round <= 4; round++) {
		in = open_left(f, &left, &refused);
		if (round <= 2) {
			g_assert_cmpuint(left->len, ==, 2);
			g_assert_cmpuint(refused->len, ==, 0);
		} else {
			g_assert_cmpuint(left->len, ==, 1);
			g_assert_cmpuint(left_unique(left, 0), ==, 32);
			g_assert_cmpuint(refused->len, ==, 1);
			g_assert_cmpuint(g_array_index(refused,
						       struct pf_refusal,
						       0).unique, ==, 30);
			g_assert_cmpint(g_array_index(refused,
						      struct pf_refusal,
						      0).err, ==, EIO);
		}
		/* Processed again: the read returns (it waits again), the
		 * write never does. */
		for (guint i = 0; i < left->len; i++)
			pf_inflight_replaying(in, left_unique(left, i), FALSE);
		pf_inflight_replaying(in, 32, TRUE);
		free_all(in, left, refused);
	}
	/* Left, then the server dies before processing anything again: */
	for (guint round = 1; round <= 3; round++) {
		in = open_left(f, &left, &refused);
		g_assert_cmpuint(left->len, ==, 1);
		free_all(in, left, refused);
	}
	in = open_left(f, &left, &refused);
	pf_inflight_forget_all(in);
	free_all(in, left, refused);
	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len + refused->len, ==, 0);
	free_all(in, left, refused);
}

/* The kernel sends an INTERRUPT for a waiting request once: if the server
 * dies before answering it, the successor answers that request EINTR
 * rather than processing it again; also when the INTERRUPT was only in a
 * read buffer. */
static void test_interrupted(struct fixture *f, gconstpointer data)
{
	GPtrArray *left;
	GArray *refused;
	struct pf_inflight *in = open_left(f, &left, &refused);
	char intr[48];
	gsize size;
	void *buf;

	(void)data;
	deliver(f, in, 80, FUSE_READ, 50);	/* parked */
	pf_inflight_processed(in, 50);
	deliver(f, in, 80, FUSE_READ, 52);	/* parked */
	pf_inflight_processed(in, 52);
	make_request(intr, sizeof(intr), FUSE_INTERRUPT, 54);
	*(guint64 *)(intr + sizeof(struct fuse_in_header)) = 50;
	g_assert_cmpint(write(f->pipe[1], intr, sizeof(intr)), ==,
			sizeof(intr));
	buf = pf_inflight_read_buffer(in, 0, &size);
	g_assert_cmpint(pf_inflight_read(in, f->pipe[0], buf, size), ==,
			sizeof(intr));
	free_all(in, left, refused);

	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 1);
	g_assert_cmpuint(left_unique(left, 0), ==, 52);
	g_assert_cmpuint(refused->len, ==, 1);
	g_assert_cmpuint(g_array_index(refused, struct pf_refusal, 0).unique,
			 ==, 50);
	g_assert_cmpint(g_array_index(refused, struct pf_refusal, 0).err, ==,
			EINTR);
	pf_inflight_answered(in, 50);
	/* The next INTERRUPT, for 52, only reached the read buffer. */
	buf = pf_inflight_read_buffer(in, 0, &size);
	make_request(buf, sizeof(intr), FUSE_INTERRUPT, 56);
	*(guint64 *)((char *)buf + sizeof(struct fuse_in_header)) = 52;
	free_all(in, left, refused);

	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 0);
	g_assert_cmpuint(refused->len, ==, 1);
	g_assert_cmpuint(g_array_index(refused, struct pf_refusal, 0).unique,
			 ==, 52);
	g_assert_cmpint(g_array_index(refused, struct pf_refusal, 0).err, ==,
			EINTR);
	free_all(in, left, refused);
}

/* Without a session file nothing is kept, and reads still work. */
static void test_no_record(struct fixture *f, gconstpointer data)
{
	GPtrArray *left;
	GArray *refused;
	char req[80], buf[256];

	(void)data;
	g_assert_null(pf_inflight_open(-1, "t", &left, &refused));
	g_assert_cmpuint(left->len, ==, 0);
	make_request(req, sizeof(req), FUSE_READ, 40);
	g_assert_cmpint(write(f->pipe[1], req, sizeof(req)), ==, sizeof(req));
	g_assert_cmpint(pf_inflight_read(NULL, f->pipe[0], buf, sizeof(buf)),
			==, sizeof(req));
	pf_inflight_answered(NULL, 40);
	g_ptr_array_unref(left);
	g_array_unref(refused);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add("/inflight/answered-and-not", struct fixture, NULL, setup,
		   test_answered_and_not, teardown);
	g_test_add("/inflight/unseen-in-read-buffer", struct fixture, NULL,
		   setup, test_unseen_in_read_buffer, teardown);
	g_test_add("/inflight/replay-limit", struct fixture, NULL, setup,
		   test_replay_limit, teardown);
	g_test_add("/inflight/interrupted", struct fixture, NULL, setup,
		   test_interrupted, teardown);
	g_test_add("/inflight/no-record", struct fixture, NULL, setup,
		   test_no_record, teardown);
	return g_test_run();
}
