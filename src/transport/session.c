/* session.c - serving a FUSE connection beside the GLib main loop.
 *
 * The connection (the /dev/fuse file descriptor) may outlive the process
 * that serves it: the keeper (keeper.c) mounts (mount.c) and holds it
 * while servers come and go.  A server saves the
 * connection's INIT request in the session file the keeper holds too; its
 * successor replays it to libfuse (whose answer the kernel, long done with
 * INIT, refuses harmlessly), then asks the kernel to send again every
 * request the dead server had read and not answered (FUSE_NOTIFY_RESEND,
 * Linux 6.9).  Before 6.9 the kernel cannot: the successor processes those
 * requests again from the copies the dead server kept in the same file
 * (inflight.c), which is why replies go through our own writev
 * (fuse_session_custom_io): it drops a request's copy once its answer is
 * written.  Which of the two paths a kernel offers is asked once per
 * server, before it reads anything but INIT, by sending that notice: the
 * first server of a connection asks right after INIT, a successor before
 * its readers start; on a kernel that sends requests again, nothing is
 * copied.  A successor processes everything its predecessor left before it
 * reads a new request: its readers wait at a gate that the replay opens
 * (on the other path the kernel queues what it sends again first).  The
 * kernel still knows the dead server's open files: their handles are keys
 * of a table here, and a handle this server never gave out gets a fresh
 * record (pf_session_adopt_func).
 *
 * Each session has PF_SESSION_READERS threads (one) that read /dev/fuse
 * with plain blocking reads, as libfuse's own loops do: a request costs one
 * read and one write, nothing more.  The core stays single-threaded all the
 * same: one lock, the loop lock, is held by the main thread at all times
 * except while it polls, and a session thread takes it to process a
 * request.  So every handler, timer, D-Bus callback and idle runs under
 * that lock, one at a time, and handlers may still park requests and
 * answer them later from the main loop.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <gio/gio.h>
#include <glib-unix.h>
#include <linux/fuse.h>

#include "powerfs/transport/mount.h"
#include "powerfs/transport/session.h"
#include "powerfs/transport/inflight.h"
#include "powerfs/transport/loop-hold.h"

/* Not in Debian 12's linux/fuse.h (Linux 6.9, protocol 7.40): the notice,
 * and the bit the kernel sets in the id of a request it sends again. */
#define PF_NOTIFY_RESEND 7
#define PF_UNIQUE_RESEND (G_GUINT64_CONSTANT(1) << 63)

/* Readers per mount.  More than one lets a reader wait in read(2) while
 * another processes, as in libfuse's multithreaded loop.  Measured with
 * scripts/bench --variant (README, Performance): on the 2-CPU development
 * VM two readers gave no better one-client time and less four-client
 * throughput (83,118 against 89,249 pairs/s) for more CPU per pair; on a
 * busier machine earlier, more four-client throughput in four runs of
 * five, and 7-57 % more CPU per pair in all five: the kernel wakes its
 * readers in turn, so every request wakes a thread that slept, where a
 * lone reader often finds the next request already queued.  One, then; a
 * build option to weigh it again (the README's command builds it).  With
 * more than one, requests may be processed in another order than read, as
 * in libfuse's multithreaded loop (which pairs an INTERRUPT with a request
 * it has not seen yet). */
#ifndef PF_SESSION_READERS
#define PF_SESSION_READERS 1
#endif
G_STATIC_ASSERT(PF_SESSION_READERS <= PF_INFLIGHT_READERS);

struct pf_reader {
	struct pf_session *ps;
	pthread_t thread;
	struct fuse_buf buf;	/* the thread's own */
	gboolean buf_mapped;	/* in the session file (inflight.c) */
	gboolean started;
	gint done;		/* the thread is leaving */
};

struct pf_session {
	struct fuse_session *se;
	char *name;		/* the mount point, for messages */
	struct pf_reader readers[PF_SESSION_READERS];
	gint ended;		/* a reader has queued session_ended() */
	gint stopping;		/* readers are asked to leave */
	int session_fd;		/* where the INIT request is kept, or -1 */
	gboolean init_saved;
	gboolean fresh;		/* a new connection: INIT comes first */
	int fd;			/* our copy of the /dev/fuse descriptor */
	struct pf_inflight *inflight;	/* requests read, not answered */
	GPtrArray *left;	/* a dead server's, to process again */
	GArray *refused;	/* ids of those processed again too often */
	gboolean replaying;
	gboolean resent;	/* the request in process was sent again */
	gboolean resend;	/* the kernel sends again (FUSE_NOTIFY_RESEND) */
	/* Readers wait here before their first read: a successor's, until
	 * what its predecessor left is processed; a new connection's (but
	 * the one that reads INIT), until the kernel's path is known. */
	GMutex gate_lock;
	GCond gate_cond;
	gboolean gate_open;
	pf_session_adopt_func adopt;
	void *userdata;
	GSourceFunc on_unmounted;
	gpointer on_unmounted_data;
	GHashTable *open_files;	/* fh -> struct pf_snapshot */
	guint64 next_fh;
	gboolean stopped;
};

static GMutex loop_lock;

/* Each session's record of requests by its descriptor, for io_read() and
 * io_writev(), which libfuse gives only the descriptor.  Set and cleared by
 * the main thread while other sessions' readers look: an entry's fd is set
 * last and cleared first, so a reader never takes a record it does not
 * own, nor one being freed. */
#define MAX_SESSIONS 4
static struct {
	gint fd;		/* -1: free */
	gpointer inflight;
} sessions[MAX_SESSIONS] = { { -1, NULL }, { -1, NULL }, { -1, NULL },
			     { -1, NULL } };

static gint poll_unlocked(GPollFD *fds, guint nfds, gint timeout)
{
	static gint64 held_since;
	gint ret, err;

	pf_loop_hold_end(held_since, PF_HOLD_MAIN_LOOP);
	g_mutex_unlock(&loop_lock);
	ret = g_poll(fds, nfds, timeout);
	err = errno;
	g_mutex_lock(&loop_lock);
	held_since = pf_loop_hold_start();
	/* GLib reads poll's errno (EINTR is no error): a futex wait for the
	 * lock may have set it to EAGAIN. */
	errno = err;
	return ret;
}

void pf_loop_lock_init(void)
{
	g_mutex_lock(&loop_lock);
	g_main_context_set_poll_func(NULL, poll_unlocked);
}

/* --- serving ---------------------------------------------------------------- */

/* The kernel ended the session (fusermount3 -u): tell the main loop. */
static gboolean session_ended(gpointer data)
{
	struct pf_session *ps = data;

	g_message("%s was unmounted", ps->name);
	if (ps->on_unmounted)
		ps->on_unmounted(ps->on_unmounted_data);
	return G_SOURCE_REMOVE;
}

/* The INIT request, kept for a successor before it is answered (if the
 * server dies before this, the successor finds INIT in the read buffer:
 * take_over()).  The length is written last: a successor takes a length of
 * 0 for "no INIT saved". */
G_GNUC_NO_INLINE
static void save_init(struct pf_session *ps, const struct fuse_buf *buf,
		      gsize len)
{
	const struct fuse_in_header *in = buf->mem;
	guint32 n = (guint32)len;

	/* The kernel sends INIT once, before anything else: only the reader
	 * that read it gets past the opcode test and touches init_saved
	 * (which take_over() set before any reader started). */
	if (len < sizeof(*in) || in->opcode != FUSE_INIT || ps->init_saved)
		return;
	ps->init_saved = TRUE;
	if (ps->session_fd < 0)
		return;
	if (pwrite(ps->session_fd, &n, sizeof(n), sizeof(n)) != sizeof(n) ||
	    pwrite(ps->session_fd, buf->mem, len, 2 * sizeof(n)) !=
		    (gssize)len ||
	    pwrite(ps->session_fd, &n, sizeof(n), 0) != sizeof(n))
		g_warning("%s: cannot keep the INIT request: %s; a successor "
			  "could not take over", ps->name, g_strerror(errno));
}

/* What a request read into buf asks for, for the hold timing. */
static guint32 request_opcode(const struct fuse_buf *buf, int len)
{
	const struct fuse_in_header *in = buf->mem;

	if ((buf->flags & FUSE_BUF_IS_FD) || len < (int)sizeof(*in))
		return FUSE_INIT;	/* counted as "other" */
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

static void open_gate(struct pf_session *ps)
{
	g_mutex_lock(&ps->gate_lock);
	ps->gate_open = TRUE;
	g_cond_broadcast(&ps->gate_cond);
	g_mutex_unlock(&ps->gate_lock);
}

static void refuse(struct pf_session *ps, guint64 unique, gint err);
static void choose_path(struct pf_session *ps);

/* A request read into buf, with the loop lock held: processed, or refused
 * if it crashed servers again and again (inflight.c). */
static void process(struct pf_session *ps, struct fuse_buf *buf, int len)
{
	guint64 unique = request_unique(buf, len);

	ps->resent = (unique & PF_UNIQUE_RESEND) != 0;
	if (pf_inflight_begin(ps->inflight, unique,
			      request_opcode(buf, len)))
		fuse_session_process_buf(ps->se, buf);
	else
		refuse(ps, unique, EIO);
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
		save_init(ps, &r->buf, res);
		g_mutex_lock(&loop_lock);
		held_since = pf_loop_hold_start();
		process(ps, &r->buf, res);
		if (reads_init) {
			/* Nothing else was read yet: asking the kernel to
			 * send again what is in process sends nothing. */
			reads_init = FALSE;
			choose_path(ps);
			open_gate(ps);
		}
		pf_loop_hold_end(held_since, request_opcode(&r->buf, res));
		g_mutex_unlock(&loop_lock);
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

/* Signals go to the main thread, whose loop handles them: a serving thread
 * starts with every asynchronous signal blocked. */
static int start_serving(struct pf_session *ps)
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
		r->buf.mem = pf_inflight_read_buffer(ps->inflight, i,
						     &r->buf.size);
		r->buf_mapped = r->buf.mem != NULL;
		err = pthread_create(&r->thread, NULL, serve, r);
		r->started = !err;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

/* Called without the loop lock. */
static void stop_readers(struct pf_session *ps)
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

static ssize_t io_writev(int fd, struct iovec *iov, int count,
			 void *userdata)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	ssize_t res = writev(fd, iov, count);
	int err = errno;	/* libfuse reads it next */

	(void)userdata;
	/* ENOENT: the request is gone (interrupted, or answered already).
	 * Another error leaves it waiting in the kernel: still kept. */
	if (count > 0 && iov[0].iov_len >= sizeof(*out) && out->unique &&
	    (res >= 0 || err == ENOENT))
		pf_inflight_answered(inflight_of(fd), out->unique);
	errno = err;
	return res;
}

static const struct fuse_custom_io session_io = {
	.read = io_read,
	.writev = io_writev,
};

static gboolean register_session(struct pf_session *ps)
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

static void unregister_session(struct pf_session *ps)
{
	for (guint i = 0; i < MAX_SESSIONS; i++)
		if (ps->fd >= 0 && g_atomic_int_get(&sessions[i].fd) == ps->fd) {
			g_atomic_int_set(&sessions[i].fd, -1);
			g_atomic_pointer_set(&sessions[i].inflight, NULL);
		}
}

/* The requests a dead server had read and not answered, on a kernel that
 * cannot send them again: processed as if just read (after the state is
 * restored: the loop runs this first), in the order the kernel sent them,
 * before any new request is read (the readers wait at the gate until
 * then).  Their copies stay kept until answered. */
static gboolean replay_left(gpointer data)
{
	struct pf_session *ps = data;

	ps->replaying = TRUE;
	for (guint i = 0; ps->left && i < ps->left->len; i++) {
		gsize len;
		const void *req = g_bytes_get_data(ps->left->pdata[i], &len);
		g_autofree void *copy = g_memdup2(req, len);
		struct fuse_buf fbuf = { .mem = copy, .size = len };

		process(ps, &fbuf, (int)len);
	}
	ps->replaying = FALSE;
	g_clear_pointer(&ps->left, g_ptr_array_unref);
	open_gate(ps);
	return G_SOURCE_REMOVE;
}

/* Answers request unique with error err, unprocessed. */
static void refuse(struct pf_session *ps, guint64 unique, gint err)
{
	struct fuse_out_header out = {
		.len = sizeof(out),
		.error = -err,
		.unique = unique,
	};
	struct iovec iov = { &out, sizeof(out) };

	if (err == EIO)
		g_warning("%s: request %" G_GUINT64_FORMAT " crashed three "
			  "servers in turn: answered EIO", ps->name,
			  unique & ~PF_UNIQUE_RESEND);
	io_writev(ps->fd, &iov, 1, NULL);
}

/* Left requests whose callers were signalled (EINTR), and those that
 * crashed servers again and again (EIO): answered without processing. */
static void refuse_left(struct pf_session *ps)
{
	for (guint i = 0; i < ps->refused->len; i++) {
		const struct pf_refusal *r =
			&g_array_index(ps->refused, struct pf_refusal, i);

		refuse(ps, r->unique, r->err);
	}
}

/* Asks the kernel to send again every request a dead server read and did
 * not answer (FUSE_NOTIFY_RESEND): if it can (Linux 6.9), nothing needs to
 * be kept (ps->resend).  Called before this server read anything but INIT,
 * so that the kernel sends again only what a predecessor left. */
static void choose_path(struct pf_session *ps)
{
	struct fuse_out_header resend = {
		.len = sizeof(resend),
		.error = PF_NOTIFY_RESEND,
	};
	const char *forced = g_getenv("POWERFS_NO_RESEND");

	if (ps->session_fd < 0)
		return;		/* no successor will ever take over */
	ps->resend = !forced && write(ps->fd, &resend, sizeof(resend)) ==
					sizeof(resend);
	pf_inflight_set_resend(ps->inflight, ps->resend);
	if (!ps->fresh)
		return;
	if (ps->resend)
		g_message("%s: path: resend (the kernel sends a successor what "
			  "a dead server left unanswered: FUSE_NOTIFY_RESEND; "
			  "nothing is kept)", ps->name);
	else
		g_message("%s: path: replay (%s: every request is kept in the "
			  "session file until answered, for a successor)",
			  ps->name, forced ? "POWERFS_NO_RESEND" :
			  "no FUSE_NOTIFY_RESEND before Linux 6.9");
}

gboolean pf_session_replaying(const struct pf_session *ps)
{
	return ps->replaying || ps->resent;
}

/* The INIT request a previous server saved: NULL if none.  Its size is
 * checked before anything is allocated (the file is ours, but a torn or
 * damaged record must not cost gigabytes). */
#define INIT_MAX 4096

static GBytes *saved_init(struct pf_session *ps, GError **error)
{
	guint32 total = 0, len = 0;
	struct fuse_in_header h;
	g_autofree char *init = NULL;

	if (ps->session_fd < 0 ||
	    pread(ps->session_fd, &total, sizeof(total), 0) != sizeof(total) ||
	    total == 0)
		return NULL;
	if (total < sizeof(h) || total > INIT_MAX ||
	    pread(ps->session_fd, &len, sizeof(len), sizeof(len)) !=
		    sizeof(len) ||
	    len != total ||
	    pread(ps->session_fd, &h, sizeof(h), 2 * sizeof(len)) !=
		    sizeof(h) ||
	    h.len != len || h.opcode != FUSE_INIT) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "%s: the connection's INIT request is damaged "
			    "(%u bytes)", ps->name, total);
		return NULL;
	}
	init = g_malloc(len);
	if (pread(ps->session_fd, init, len, 2 * sizeof(len)) != (gssize)len) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "%s: the connection's INIT request is lost",
			    ps->name);
		return NULL;
	}
	return g_bytes_new_take(g_steal_pointer(&init), len);
}

/* Take over a connection a previous server had: libfuse learns the INIT it
 * answered, the kernel sends again what that server left unanswered (or,
 * before Linux 6.9, we process it again, before anything new). */
static gboolean take_over(struct pf_session *ps, GError **error)
{
	g_autoptr(GBytes) saved = NULL;
	g_autoptr(GBytes) buffered = NULL;
	g_autofree void *init = NULL;
	struct fuse_buf fbuf = { 0 };
	GError *err = NULL;

	saved = saved_init(ps, &err);
	if (err) {
		g_propagate_error(error, err);
		return FALSE;
	}
	/* Only if none was saved: the first server read INIT and died
	 * before it saved it, and the kernel waits for the answer. */
	buffered = pf_inflight_take_buffered_init(ps->inflight);
	if (!saved && !buffered) {
		/* A new connection: INIT comes (serve()). */
		ps->fresh = TRUE;
		return TRUE;
	}
	if (saved) {
		init = g_bytes_unref_to_data(g_steal_pointer(&saved),
					     &fbuf.size);
		ps->init_saved = TRUE;
	} else {
		init = g_bytes_unref_to_data(g_steal_pointer(&buffered),
					     &fbuf.size);
		g_message("%s: answering the INIT request the previous "
			  "server had taken", ps->name);
	}
	fbuf.mem = init;
	save_init(ps, &fbuf, fbuf.size);
	fuse_session_process_buf(ps->se, &fbuf);
	choose_path(ps);
	if (ps->resend) {
		g_clear_pointer(&ps->left, g_ptr_array_unref);
		g_message("%s: taken over (path: resend): the kernel sends "
			  "again what the previous server left unanswered",
			  ps->name);
		open_gate(ps);
		return TRUE;
	}
	if (!ps->inflight)
		g_warning("%s: the requests the previous server had not "
			  "answered are lost (the kernel cannot send them "
			  "again before Linux 6.9): their callers wait until "
			  "the mount goes", ps->name);
	refuse_left(ps);
	g_message("%s: taken over (path: replay): the previous server left "
		  "%u %s unanswered, processed again from the session file"
		  "%s", ps->name, ps->left->len,
		  ps->left->len == 1 ? "request" : "requests",
		  ps->refused->len ? " (and some refused)" : "");
	/* Before any new request: the readers wait for this. */
	g_idle_add_full(G_PRIORITY_HIGH, replay_left, ps, NULL);
	return TRUE;
}

static void open_file_free(gpointer data)
{
	struct pf_snapshot *snap = data;

	g_string_free(snap->text, TRUE);
	g_free(snap);		/* the record it is the first member of */
}

/* Frees a session no reader serves: idles still queued for it go
 * (session_ended(), replay_left(): the requests stay kept for a
 * successor), the session closes our copy of the descriptor (the keeper
 * keeps its own), and files still open get their release from a successor,
 * or never. */
static void session_destroy(struct pf_session *ps)
{
	while (g_idle_remove_by_data(ps))
		;
	if (ps->left)
		g_ptr_array_unref(ps->left);
	if (ps->refused)
		g_array_unref(ps->refused);
	unregister_session(ps);
	if (ps->se)
		fuse_session_destroy(ps->se);
	for (guint i = 0; i < PF_SESSION_READERS; i++)
		if (!ps->readers[i].buf_mapped)
			free(ps->readers[i].buf.mem);
	pf_inflight_free(ps->inflight);
	g_hash_table_unref(ps->open_files);
	g_mutex_clear(&ps->gate_lock);
	g_cond_clear(&ps->gate_cond);
	g_free(ps->name);
	g_free(ps);
}

struct pf_session *pf_session_serve(const struct fuse_lowlevel_ops *ops,
				    void *userdata, int fuse_fd,
				    int session_fd, const char *name,
				    pf_session_adopt_func adopt,
				    GSourceFunc on_unmounted, gpointer data,
				    GError **error)
{
	struct pf_session *ps = g_new0(struct pf_session, 1);
	char *argv[] = { "powerfs", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	int fd = fcntl(fuse_fd, F_DUPFD_CLOEXEC, 3);
	int err;

	ps->name = g_strdup(name);
	ps->fd = fd;
	ps->session_fd = session_fd;
	ps->adopt = adopt;
	ps->userdata = userdata;
	ps->on_unmounted = on_unmounted;
	ps->on_unmounted_data = data;
	ps->open_files = g_hash_table_new_full(g_int64_hash, g_int64_equal,
					       NULL, open_file_free);
	/* Handles of earlier servers are not taken for ours. */
	ps->next_fh = (guint64)g_random_int() << 32 | 1;
	pf_mount_log_libfuse();
	ps->se = fuse_session_new(&args, ops, sizeof(*ops), userdata);
	fuse_opt_free_args(&args);
	g_mutex_init(&ps->gate_lock);
	g_cond_init(&ps->gate_cond);
	/* The keeper says whether the previous server crashed (rather than
	 * being killed from outside or handing over). */
	ps->inflight = pf_inflight_open(session_fd, name,
					g_getenv("POWERFS_SERVER_CRASHED") !=
						NULL,
					&ps->left, &ps->refused);
	if (fd < 0 || !ps->se ||
	    fuse_session_custom_io(ps->se, &session_io, fd) != 0 ||
	    !register_session(ps)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "%s: cannot serve /dev/fuse descriptor %d", name,
			    fuse_fd);
		/* The session closes it only once it uses it. */
		if (fd >= 0 && (!ps->se || fuse_session_fd(ps->se) != fd))
			close(fd);
		goto fail;
	}
	if (!take_over(ps, error))
		goto fail;
	err = start_serving(ps);
	if (err) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "cannot start a thread: %s", g_strerror(err));
		/* Readers that started may be processing: let them finish
		 * (the caller holds the loop lock). */
		fuse_session_exit(ps->se);
		g_mutex_unlock(&loop_lock);
		stop_readers(ps);
		g_mutex_lock(&loop_lock);
		while (g_idle_remove_by_data(ps))
			;
		goto fail;
	}
	return ps;
fail:
	session_destroy(ps);
	return NULL;
}

void pf_session_reply_open(struct pf_session *ps, fuse_req_t req,
			   struct fuse_file_info *fi, struct pf_snapshot *snap,
			   gboolean keep_cache)
{
	/* libfuse 3.14 has no field for FOPEN_PARALLEL_DIRECT_WRITES: the
	 * reply is written here.  Without it the kernel takes the inode lock
	 * for each write, and a second writer of a file whose write waits
	 * here (a suspend, a write queued behind one) would wait for it,
	 * uninterruptibly, before its write even reached us.
	 * FOPEN_NOFLUSH for the same reason at close(2): there is nothing to
	 * flush, and Linux 6.1's fuse_flush() takes the inode lock
	 * exclusively, so a reader of state closing its fd would wait, in D
	 * state, for a write of state that is suspending. */
	struct fuse_open_out out = {
		.fh = ps->next_fh++,
		.open_flags = FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES |
			      FOPEN_NOFLUSH |
			      (keep_cache ? FOPEN_KEEP_CACHE : 0),
	};

	(void)fi;
	snap->text = g_string_sized_new(64);
	snap->fh = out.fh;
	if (fuse_reply_buf(req, (const char *)&out, sizeof(out)) == -ENOENT) {
		/* The opener was interrupted; there will be no release. */
		open_file_free(snap);
		return;
	}
	g_hash_table_insert(ps->open_files, &snap->fh, snap);
}

struct pf_snapshot *pf_session_open_file(struct pf_session *ps,
					 const struct fuse_file_info *fi,
					 fuse_ino_t ino)
{
	struct pf_snapshot *snap = g_hash_table_lookup(ps->open_files,
						       &fi->fh);

	if (snap)
		return snap;
	/* A file an earlier server opened. */
	snap = ps->adopt(ps->userdata, ino);
	snap->text = g_string_sized_new(64);
	snap->fh = fi->fh;
	g_hash_table_insert(ps->open_files, &snap->fh, snap);
	return snap;
}

void pf_session_release(struct pf_session *ps, fuse_req_t req,
			struct fuse_file_info *fi)
{
	g_hash_table_remove(ps->open_files, &fi->fh);
	fuse_reply_err(req, 0);
}

/* Called from the main thread, with the loop lock held. */
void pf_session_stop(struct pf_session *ps)
{
	if (!ps || ps->stopped)
		return;
	ps->stopped = TRUE;
	fuse_session_exit(ps->se);
	/* Let requests in progress finish and stop the readers where they
	 * wait for the next one. */
	g_mutex_unlock(&loop_lock);
	stop_readers(ps);
	g_mutex_lock(&loop_lock);
}

void pf_session_free(struct pf_session *ps)
{
	if (!ps)
		return;
	pf_session_stop(ps);
	session_destroy(ps);
}

void pf_session_init_conn(struct fuse_conn_info *conn)
{
	/* Writes of two pages at most (inflight.c sizes the read buffers
	 * from it): libfuse would ask for 256 pages, and the kernel refuses
	 * every read into a buffer smaller than that. */
	conn->max_write = pf_inflight_max_write();
	/* A read the page cache sends ahead, and an asynchronous read(2)
	 * (io_submit), would be background requests: no interrupt reaches
	 * them, a waiting one leaves its reader unkillable and unfreezable,
	 * and a dozen of them stop the kernel from sending any RELEASE.
	 * Synchronous, they wait in their caller like any read. */
	conn->want &= ~(FUSE_CAP_ASYNC_READ | FUSE_CAP_ASYNC_DIO |
			FUSE_CAP_WRITEBACK_CACHE);
}

static void refuse_create(fuse_req_t req, fuse_ino_t parent, const char *name,
			  mode_t mode, struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode, (void)fi;
	fuse_reply_err(req, EACCES);
}

static void refuse_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
			 mode_t mode, dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	fuse_reply_err(req, EACCES);
}

static void refuse_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
			 mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	fuse_reply_err(req, EPERM);
}

static void refuse_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	fuse_reply_err(req, EPERM);
}

static void refuse_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			  fuse_ino_t newparent, const char *newname,
			  unsigned int flags)
{
	(void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
	fuse_reply_err(req, EPERM);
}

static void refuse_symlink(fuse_req_t req, const char *link,
			   fuse_ino_t parent, const char *name)
{
	(void)link, (void)parent, (void)name;
	fuse_reply_err(req, EPERM);
}

static void refuse_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
			const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	fuse_reply_err(req, EPERM);
}

void pf_session_refuse_changes(struct fuse_lowlevel_ops *ops)
{
	ops->create = refuse_create;
	ops->mknod = refuse_mknod;
	ops->mkdir = refuse_mkdir;
	ops->unlink = refuse_unlink;
	ops->rmdir = refuse_unlink;
	ops->rename = refuse_rename;
	ops->symlink = refuse_symlink;
	ops->link = refuse_link;
}

gboolean pf_snapshot_continues(const struct pf_snapshot *snap, off_t off)
{
	return off > 0 && snap->valid && off == snap->end;
}

void pf_snapshot_reply(fuse_req_t req, struct pf_snapshot *snap, size_t size,
		       off_t off)
{
	gsize len = snap->text->len;
	size_t n = (gsize)off < len ? MIN(size, len - off) : 0;

	snap->end = off + n;
	fuse_reply_buf(req, snap->text->str + MIN((gsize)off, len), n);
}
