/* test-inflight.c - unit tests of the record of requests in progress
 * (src/transport/inflight.c) on a real memfd: what a successor finds after a server
 * "dies" (its record freed without answering), read buffers the kernel
 * filled behind a dead reader's back, the crash limit, sizes.  The
 * take-over itself is tested against a fake kernel (test-session.c), the
 * whole path, with servers killed under load, on real mounts
 * (tests/test_keeper.py).
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <glib.h>
#include <linux/fuse.h>

#include "powerfs/transport/inflight.h"

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
static void make_request(void *out, guint32 len, guint32 opcode, guint64 unique)
{
	struct fuse_in_header *h = out;

	memset(out, 'x', len);
	*h = (struct fuse_in_header){
		.len = len, .opcode = opcode, .unique = unique, .nodeid = 1
	};
}

/* The kernel hands a request to reader 0: through a pipe, into its read
 * buffer in the record. */
static void deliver(struct fixture *f, struct pf_inflight *in, guint32 len,
		    guint32 opcode, guint64 unique)
{
	g_autofree char *req = g_malloc(len);
	gsize size;
	void *buf = pf_inflight_read_buffer(in, 0, &size);

	g_assert_nonnull(buf);
	make_request(req, len, opcode, unique);
	g_assert_cmpint(write(f->pipe[1], req, len), ==, len);
	g_assert_cmpint(pf_inflight_read(in, f->pipe[0], buf, size), ==, len);
}

/* The record as a successor opens it; crashed: its predecessor crashed
 * (not killed from outside). */
static struct pf_inflight *open_after(struct fixture *f, gboolean crashed,
				      GPtrArray **left, GArray **refused)
{
	struct pf_inflight *in =
		pf_inflight_open(f->memfd, "t", crashed, left, refused);

	g_assert_nonnull(in);
	return in;
}

static struct pf_inflight *open_left(struct fixture *f, GPtrArray **left,
				     GArray **refused)
{
	return open_after(f, FALSE, left, refused);
}

static guint64 left_unique(GPtrArray *left, guint i)
{
	const struct fuse_in_header *h = g_bytes_get_data(left->pdata[i], NULL);

	return h->unique;
}

static void free_all(struct pf_inflight *in, GPtrArray *left, GArray *refused)
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
	deliver(f, in, 80, FUSE_READ, 10); /* parked */
	pf_inflight_end(in, 10);
	deliver(f, in, 60, FUSE_LOOKUP, 12); /* answered at once */
	pf_inflight_answered(in, 12);
	pf_inflight_end(in, 12);
	deliver(f, in, 84, FUSE_WRITE, 8); /* older, still processing */
	deliver(f, in, 48, FUSE_FORGET, 14);
	free_all(in, left, refused); /* the server dies */

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
	pf_inflight_end(in, 20);
	/* Behind the reader's back, as the kernel's copy would land. */
	buf = pf_inflight_read_buffer(in, 0, &size);
	make_request(buf, 72, FUSE_OPEN, 22);
	free_all(in, left, refused);

	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 1);
	g_assert_cmpuint(left_unique(left, 0), ==, 22);
	free_all(in, left, refused); /* dies again before answering */

	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 1); /* from its slot now */
	g_assert_cmpuint(left_unique(left, 0), ==, 22);
	pf_inflight_answered(in, 22);
	free_all(in, left, refused);
	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 0);
	g_assert_null(pf_inflight_take_buffered_init(in));
	/* A connection's first server dies inside the read of INIT. */
	buf = pf_inflight_read_buffer(in, 0, &size);
	make_request(buf, 104, FUSE_INIT, 2);
	free_all(in, left, refused);
	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 0);
	{
		g_autoptr(GBytes) init = pf_inflight_take_buffered_init(in);
		const struct fuse_in_header *h;

		g_assert_nonnull(init);
		h = g_bytes_get_data(init, &size);
		g_assert_cmpuint(size, ==, 104);
		g_assert_cmpuint(h->opcode, ==, FUSE_INIT);
	}
	free_all(in, left, refused);
}

/* A request whose processing crashed three servers in turn is refused
 * with EIO by the fourth; one that only waits is processed again at every
 * hand-over without limit; deaths by SIGKILL from outside (the successor
 * is told the predecessor did not crash) count nothing; and a request
 * whose processing returned starts again from nothing. */
static void test_crash_limit(struct fixture *f, gconstpointer data)
{
	GPtrArray *left;
	GArray *refused;
	struct pf_inflight *in = open_left(f, &left, &refused);

	(void)data;
	deliver(f, in, 84, FUSE_WRITE, 30); /* kills the server */
	deliver(f, in, 80, FUSE_READ, 32);  /* only waits */
	g_assert_true(pf_inflight_begin(in, 32, FUSE_READ));
	pf_inflight_end(in, 32);
	g_assert_true(pf_inflight_begin(in, 30, FUSE_WRITE));
	free_all(in, left, refused); /* crashed in 30: 1 death */
	/* Successors: each crashed in 30, but one of them killed by
	 * SIGKILL from outside while in 30, which counts nothing. */
	for (guint round = 1; round <= 4; round++) {
		gboolean crashed = round != 2;

		in = open_after(f, crashed, &left, &refused);
		if (round < 4) {
			g_assert_cmpuint(left->len, ==, 2);
			g_assert_cmpuint(refused->len, ==, 0);
		} else {
			/* Three crashes in 30: refused. */
			g_assert_cmpuint(left->len, ==, 1);
			g_assert_cmpuint(left_unique(left, 0), ==, 32);
			g_assert_cmpuint(refused->len, ==, 1);
			g_assert_cmpuint(
				g_array_index(refused, struct pf_refusal, 0)
					.unique,
				==, 30);
			g_assert_cmpint(
				g_array_index(refused, struct pf_refusal, 0)
					.err,
				==, EIO);
			/* On the other path it comes as a new request: */
			g_assert_false(pf_inflight_begin(in, 30, FUSE_WRITE));
		}
		/* Processed again: the read returns (it waits again), the
		 * write never does. */
		g_assert_true(pf_inflight_begin(in, 32, FUSE_READ));
		pf_inflight_end(in, 32);
		if (round < 4)
			g_assert_true(pf_inflight_begin(in, 30, FUSE_WRITE));
		free_all(in, left, refused);
	}
	/* One whose processing returns is no killer any more. */
	in = open_after(f, TRUE, &left, &refused);
	pf_inflight_answered(in, 30);
	deliver(f, in, 84, FUSE_WRITE, 40);
	g_assert_true(pf_inflight_begin(in, 40, FUSE_WRITE));
	free_all(in, left, refused);
	in = open_after(f, TRUE, &left, &refused);
	g_assert_true(pf_inflight_begin(in, 40, FUSE_WRITE));
	pf_inflight_end(in, 40);
	free_all(in, left, refused);
	for (guint round = 1; round <= 2; round++) {
		in = open_after(f, TRUE, &left, &refused);
		g_assert_true(pf_inflight_begin(in, 40, FUSE_WRITE));
		free_all(in, left, refused);
	}
	in = open_after(f, TRUE, &left, &refused);
	g_assert_cmpuint(refused->len, ==, 0);
	pf_inflight_set_resend(in, TRUE);
	free_all(in, left, refused);
	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len + refused->len, ==, 0);
	free_all(in, left, refused);
}

/* The INIT request read and seen by its reader, and not saved (the server
 * died in between): the successor finds it in the read buffer. */
static void test_init_seen_not_saved(struct fixture *f, gconstpointer data)
{
	GPtrArray *left;
	GArray *refused;
	struct pf_inflight *in = open_left(f, &left, &refused);
	g_autoptr(GBytes) init = NULL;

	(void)data;
	deliver(f, in, 104, FUSE_INIT, 2);
	free_all(in, left, refused);
	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 0);
	init = pf_inflight_take_buffered_init(in);
	g_assert_nonnull(init);
	g_assert_cmpuint(g_bytes_get_size(init), ==, 104);
	free_all(in, left, refused);
}

/* However many requests wait, and however large (up to what a read may
 * bring), a successor finds them all; the record grows for them. */
static void test_every_request_is_kept(struct fixture *f, gconstpointer data)
{
	GPtrArray *left;
	GArray *refused;
	struct pf_inflight *in = open_left(f, &left, &refused);
	guint32 big = 80 + pf_inflight_max_write();
	const guint n = 3000;

	(void)data;
	for (guint i = 0; i < n; i++) {
		deliver(f, in, 80, FUSE_READ, 100 + 2 * i);
		pf_inflight_end(in, 100 + 2 * i);
	}
	deliver(f, in, big, FUSE_WRITE, 100 + 2 * n);
	pf_inflight_end(in, 100 + 2 * n);
	free_all(in, left, refused);
	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, n + 1);
	for (guint i = 0; i <= n; i++)
		g_assert_cmpuint(left_unique(left, i), ==, 100 + 2 * i);
	g_assert_cmpuint(g_bytes_get_size(left->pdata[n]), ==, big);
	/* Answered now: nothing left, and the free slots are used again. */
	for (guint i = 0; i <= n; i++)
		pf_inflight_answered(in, 100 + 2 * i);
	deliver(f, in, 80, FUSE_READ, 90000);
	free_all(in, left, refused);
	in = open_left(f, &left, &refused);
	g_assert_cmpuint(left->len, ==, 1);
	free_all(in, left, refused);
}

/* Read buffers hold the largest request of the connection whatever the
 * page size: max_write is two pages, and a buffer takes it and its
 * headers.  A connection a powerfs before this record set up (its INIT
 * saved, no record of ours) negotiated libfuse's 256 pages: its buffers
 * are that large. */
static void test_read_buffer_sizes(struct fixture *f, gconstpointer data)
{
	gsize page = sysconf(_SC_PAGESIZE), size;
	guint32 init_len = 104;
	GPtrArray *left;
	GArray *refused;
	struct pf_inflight *in;

	(void)data;
	g_assert_cmpuint(pf_inflight_max_write(), ==, 2 * page);
	in = open_left(f, &left, &refused);
	pf_inflight_read_buffer(in, 0, &size);
	g_assert_cmpuint(size, >=, 80 + pf_inflight_max_write());
	g_assert_cmpuint(size, >=, 8192); /* FUSE_MIN_READ_BUFFER */
	g_assert_cmpuint(size % page, ==, 0);
	free_all(in, left, refused);

	close(f->memfd);
	f->memfd = memfd_create("test-inflight", MFD_CLOEXEC);
	g_assert_cmpint(pwrite(f->memfd, &init_len, 4, 0), ==, 4);
	in = open_left(f, &left, &refused);
	pf_inflight_read_buffer(in, 0, &size);
	g_assert_cmpuint(size, >=, 80 + 256 * page);
	free_all(in, left, refused);
	/* A successor keeps the size the record says. */
	in = open_left(f, &left, &refused);
	pf_inflight_read_buffer(in, 0, &size);
	g_assert_cmpuint(size, >=, 80 + 256 * page);
	free_all(in, left, refused);
}

/* On a kernel that sends requests again, nothing is copied. */
static void test_nothing_kept_on_resend(struct fixture *f, gconstpointer data)
{
	GPtrArray *left;
	GArray *refused;
	struct pf_inflight *in = open_left(f, &left, &refused);

	(void)data;
	pf_inflight_set_resend(in, TRUE);
	deliver(f, in, 80, FUSE_READ, 10);
	pf_inflight_end(in, 10);
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
	deliver(f, in, 80, FUSE_READ, 50); /* parked */
	pf_inflight_end(in, 50);
	deliver(f, in, 80, FUSE_READ, 52); /* parked */
	pf_inflight_end(in, 52);
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
	g_assert_null(pf_inflight_open(-1, "t", FALSE, &left, &refused));
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
	g_test_add("/inflight/crash-limit", struct fixture, NULL, setup,
		   test_crash_limit, teardown);
	g_test_add("/inflight/init-seen-not-saved", struct fixture, NULL, setup,
		   test_init_seen_not_saved, teardown);
	g_test_add("/inflight/every-request-is-kept", struct fixture, NULL,
		   setup, test_every_request_is_kept, teardown);
	g_test_add("/inflight/read-buffer-sizes", struct fixture, NULL, setup,
		   test_read_buffer_sizes, teardown);
	g_test_add("/inflight/nothing-kept-on-resend", struct fixture, NULL,
		   setup, test_nothing_kept_on_resend, teardown);
	g_test_add("/inflight/interrupted", struct fixture, NULL, setup,
		   test_interrupted, teardown);
	g_test_add("/inflight/no-record", struct fixture, NULL, setup,
		   test_no_record, teardown);
	return g_test_run();
}
