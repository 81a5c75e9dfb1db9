/* readers.c - the threads that read a FUSE connection, and the custom
 * I/O libfuse reads and writes /dev/fuse through.
 *
 * Each session has PF_SESSION_READERS threads (one) that read /dev/fuse
 * with plain blocking reads, as libfuse's own loops do: a request costs one
 * read and one write, nothing more.  A reader processes what it read under
 * the loop lock (loop-lock.c), so the core stays single-threaded.  Through
 * the custom I/O each request is kept in the session file from the moment
 * it is read until its answer is written (inflight.c), for a successor
 * (take-over.c).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>
#include <glib.h>
#include <linux/fuse.h>

#include "powerfs/transport/inflight.h"
#include "powerfs/transport/loop-hold.h"
#include "powerfs/transport/loop-lock.h"
#include "session-internal.h"

/* Each session's record of requests by its descriptor, for io_read() and
 * io_writev(), which libfuse gives only the descriptor.  Set and cleared by
 * the main thread while other sessions' readers look: an entry's fd is set
 * last and cleared first, so a reader never takes a record it does not
 * own, nor one being freed. */
#define MAX_SESSIONS 4
static struct {
	gint fd; /* -1: free */
	gpointer inflight;
} sessions[MAX_SESSIONS] = {
	{ -1, NULL }, { -1, NULL }, { -1, NULL }, { -1, NULL }
};

/* The kernel ended the session (fusermount3 -u): tell the main loop. */
static gboolean session_ended(gpointer data)
{
	struct pf_session *ps = data;

	g_message("%s was unmounted", ps->name);
	if (ps->on_unmounted)
		ps->on_unmounted(ps->on_unmounted_data);
	return G_SOURCE_REMOVE;
}

/* What a request read into buf asks for, for the hold timing. */
static guint32 request_opcode(const struct fuse_buf *buf, int len)
{
	const struct fuse_in_header *in = buf->mem;

	if ((buf->flags & FUSE_BUF_IS_FD) || len < (int)sizeof(*in))
		return FUSE_INIT; /* counted as "other" */
	return in->opcode;
}

static guint64 request_unique(const struct fuse_buf *buf, int len)
{
	const struct fuse_in_header *in = buf->mem;

	if ((buf->flags & FUSE_BUF_IS_FD) || len < (int)sizeof(*in))
		return 0;
	return in->unique;
}

/* Readers are stopped with a signal, not with pthread_cancel(): this
 * glibc can act on a cancellation just after read(2) returned a request,
 * which the kernel then counts as taken while nobody has it, kept
 * (inflight.c) or answered.  A signal interrupts only a read that still
 * waits: a request already read is returned, and kept, and the reader sees
 * "stopping" next.  The signal has a handler that does nothing, without
 * SA_RESTART, so that the read fails with EINTR. */
#define WAKE_SIGNAL SIGRTMIN

static void on_wake_signal(int sig)
{
	(void)sig;
}

static void wait_at_gate(struct pf_session *ps)
{
	g_mutex_lock(&ps->gate_lock);
	while (!ps->gate_open && !g_atomic_int_get(&ps->stopping))
		g_cond_wait(&ps->gate_cond, &ps->gate_lock);
	g_mutex_unlock(&ps->gate_lock);
}

void pf_session_open_gate(struct pf_session *ps)
{
	g_mutex_lock(&ps->gate_lock);
	ps->gate_open = TRUE;
	g_cond_broadcast(&ps->gate_cond);
	g_mutex_unlock(&ps->gate_lock);
}

void pf_session_process(struct pf_session *ps, struct fuse_buf *buf, int len)
{
	guint64 unique = request_unique(buf, len);

	ps->resent = (unique & PF_UNIQUE_RESEND) != 0;
	if (pf_inflight_begin(ps->inflight, unique, request_opcode(buf, len)))
		fuse_session_process_buf(ps->se, buf);
	else
		pf_session_refuse_request(ps, unique, EIO);
	ps->resent = FALSE;
	pf_inflight_end(ps->inflight, unique);
}

static void *serve(void *data)
{
	struct pf_reader *r = data;
	struct pf_session *ps = r->ps;
	/* A new connection's first reader reads INIT, the only request the
	 * kernel sends until it is answered. */
	gboolean reads_init = ps->fresh && r == &ps->readers[0];
	gint64 held_since;
	sigset_t wake;
	int res = 0;

	sigemptyset(&wake);
	sigaddset(&wake, WAKE_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &wake, NULL);
	if (!reads_init)
		wait_at_gate(ps);
	while (!g_atomic_int_get(&ps->stopping)) {
		res = fuse_session_receive_buf(ps->se, &r->buf);
		if (g_atomic_int_get(&ps->stopping))
			break;
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0 || fuse_session_exited(ps->se))
			break;
		pf_session_save_init(ps, &r->buf, res);
		pf_loop_lock_take();
		held_since = pf_loop_hold_start();
		pf_session_process(ps, &r->buf, res);
		if (reads_init) {
			/* Nothing else was read yet: asking the kernel to
			 * send again what is in process sends nothing. */
			reads_init = FALSE;
			pf_session_choose_path(ps);
			pf_session_open_gate(ps);
		}
		pf_loop_hold_end(held_since, request_opcode(&r->buf, res));
		pf_loop_lock_release();
	}
	if (res < 0 && res != -EINTR)
		g_warning("reading /dev/fuse: %s", g_strerror(-res));
	/* The first reader out by itself (the mount went) tells the main
	 * loop, once; it stops the others (pf_session_stop). */
	if (!g_atomic_int_get(&ps->stopping) &&
	    g_atomic_int_add(&ps->ended, 1) == 0)
		g_idle_add(session_ended, ps);
	g_atomic_int_set(&r->done, 1);
	return NULL;
}

int pf_session_start_readers(struct pf_session *ps)
{
	static gsize handler_set;
	sigset_t all, old;
	int err = 0;

	if (g_once_init_enter(&handler_set)) {
		struct sigaction sa = { .sa_handler = on_wake_signal };

		sigemptyset(&sa.sa_mask);
		sigaction(WAKE_SIGNAL, &sa, NULL);
		g_once_init_leave(&handler_set, 1);
	}
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (guint i = 0; i < PF_SESSION_READERS && !err; i++) {
		struct pf_reader *r = &ps->readers[i];

		r->ps = ps;
		r->buf.mem =
			pf_inflight_read_buffer(ps->inflight, i, &r->buf.size);
		r->buf_mapped = r->buf.mem != NULL;
		err = pthread_create(&r->thread, NULL, serve, r);
		r->started = !err;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

void pf_session_stop_readers(struct pf_session *ps)
{
	g_atomic_int_set(&ps->stopping, 1);
	g_mutex_lock(&ps->gate_lock);
	g_cond_broadcast(&ps->gate_cond);
	g_mutex_unlock(&ps->gate_lock);
	for (guint i = 0; i < PF_SESSION_READERS; i++) {
		struct pf_reader *r = &ps->readers[i];

		if (!r->started)
			continue;
		/* Again until it is out: a signal that came just before
		 * the reader's read(2) interrupted nothing. */
		while (!g_atomic_int_get(&r->done)) {
			pthread_kill(r->thread, WAKE_SIGNAL);
			g_usleep(1000);
		}
		pthread_join(r->thread, NULL);
		r->started = FALSE;
	}
}

static struct pf_inflight *inflight_of(int fd)
{
	for (guint i = 0; i < MAX_SESSIONS; i++)
		if (g_atomic_int_get(&sessions[i].fd) == fd)
			return g_atomic_pointer_get(&sessions[i].inflight);
	return NULL;
}

/* libfuse reads and writes /dev/fuse through these (a custom io): the same
 * system calls as its own.  A request is kept as soon as it is read: before
 * its reader waits for the loop lock, and even if libfuse then drops it
 * because the session is ending (a hand-over: the successor answers it).
 * It is no longer kept once its answer is written. */
static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	return pf_inflight_read(inflight_of(fd), fd, buf, len);
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	ssize_t res = writev(fd, iov, count);
	int err = errno; /* libfuse reads it next */

	(void)userdata;
	/* ENOENT: the request is gone (interrupted, or answered already).
	 * Another error leaves it waiting in the kernel: still kept. */
	if (count > 0 && iov[0].iov_len >= sizeof(*out) && out->unique &&
	    (res >= 0 || err == ENOENT))
		pf_inflight_answered(inflight_of(fd), out->unique);
	errno = err;
	return res;
}

const struct fuse_custom_io pf_session_io = {
	.read = io_read,
	.writev = io_writev,
};

gboolean pf_session_register(struct pf_session *ps)
{
	for (guint i = 0; i < MAX_SESSIONS; i++)
		if (g_atomic_int_get(&sessions[i].fd) < 0) {
			g_atomic_pointer_set(&sessions[i].inflight,
					     ps->inflight);
			g_atomic_int_set(&sessions[i].fd, ps->fd);
			return TRUE;
		}
	return FALSE;
}

void pf_session_unregister(struct pf_session *ps)
{
	for (guint i = 0; i < MAX_SESSIONS; i++)
		if (ps->fd >= 0 &&
		    g_atomic_int_get(&sessions[i].fd) == ps->fd) {
			g_atomic_int_set(&sessions[i].fd, -1);
			g_atomic_pointer_set(&sessions[i].inflight, NULL);
		}
}

void pf_session_refuse_request(struct pf_session *ps, guint64 unique, gint err)
{
	struct fuse_out_header out = {
		.len = sizeof(out),
		.error = -err,
		.unique = unique,
	};
	struct iovec iov = { &out, sizeof(out) };

	if (err == EIO)
		g_warning("%s: request %" G_GUINT64_FORMAT " crashed three "
			  "servers in turn: answered EIO",
			  ps->name, unique & ~PF_UNIQUE_RESEND);
	io_writev(ps->fd, &iov, 1, NULL);
}
