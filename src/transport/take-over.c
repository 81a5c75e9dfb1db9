/* take-over.c - a successor takes over the connection of a server that
 * died or handed over.
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
 * (readers.c's custom I/O): it drops a request's copy once its answer is
 * written.  Which of the two paths a kernel offers is asked once per
 * server, before it reads anything but INIT, by sending that notice: the
 * first server of a connection asks right after INIT, a successor before
 * its readers start; on a kernel that sends requests again, nothing is
 * copied.  A successor processes everything its predecessor left before it
 * reads a new request: its readers wait at a gate that the replay opens
 * (on the other path the kernel queues what it sends again first).  The
 * kernel still knows the dead server's open files: their handles are keys
 * of a table (open-files.c), and a handle this server never gave out gets
 * a fresh record (pf_session_adopt_func).
 */
#include <errno.h>
#include <unistd.h>
#include <gio/gio.h>
#include <linux/fuse.h>

#include "powerfs/transport/inflight.h"
#include "session-internal.h"

/* The INIT request, kept for a successor before it is answered (if the
 * server dies before this, the successor finds INIT in the read buffer:
 * pf_session_take_over()).  The length is written last: a successor takes a length of
 * 0 for "no INIT saved". */
G_GNUC_NO_INLINE
void pf_session_save_init(struct pf_session *ps, const struct fuse_buf *buf,
			  gsize len)
{
	const struct fuse_in_header *in = buf->mem;
	guint32 n = (guint32)len;

	/* The kernel sends INIT once, before anything else: only the reader
	 * that read it gets past the opcode test and touches init_saved
	 * (which pf_session_take_over() set before any reader started). */
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
			  "could not take over",
			  ps->name, g_strerror(errno));
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

		pf_session_process(ps, &fbuf, (int)len);
	}
	ps->replaying = FALSE;
	g_clear_pointer(&ps->left, g_ptr_array_unref);
	pf_session_open_gate(ps);
	return G_SOURCE_REMOVE;
}

/* Left requests whose callers were signalled (EINTR), and those that
 * crashed servers again and again (EIO): answered without processing. */
static void refuse_left(struct pf_session *ps)
{
	for (guint i = 0; i < ps->refused->len; i++) {
		const struct pf_refusal *r =
			&g_array_index(ps->refused, struct pf_refusal, i);

		pf_session_refuse_request(ps, r->unique, r->err);
	}
}

/* Asks the kernel to send again every request a dead server read and did
 * not answer (FUSE_NOTIFY_RESEND): if it can (Linux 6.9), nothing needs to
 * be kept (ps->resend).  Called before this server read anything but INIT,
 * so that the kernel sends again only what a predecessor left. */
void pf_session_choose_path(struct pf_session *ps)
{
	struct fuse_out_header resend = {
		.len = sizeof(resend),
		.error = PF_NOTIFY_RESEND,
	};
	const char *forced = g_getenv("POWERFS_NO_RESEND");

	if (ps->session_fd < 0)
		return; /* no successor will ever take over */
	ps->resend = !forced &&
		     write(ps->fd, &resend, sizeof(resend)) == sizeof(resend);
	pf_inflight_set_resend(ps->inflight, ps->resend);
	if (!ps->fresh)
		return;
	if (ps->resend)
		g_message("%s: path: resend (the kernel sends a successor what "
			  "a dead server left unanswered: FUSE_NOTIFY_RESEND; "
			  "nothing is kept)",
			  ps->name);
	else
		g_message("%s: path: replay (%s: every request is kept in the "
			  "session file until answered, for a successor)",
			  ps->name,
			  forced ? "POWERFS_NO_RESEND" :
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
			    "(%u bytes)",
			    ps->name, total);
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
gboolean pf_session_take_over(struct pf_session *ps, GError **error)
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
			  "server had taken",
			  ps->name);
	}
	fbuf.mem = init;
	pf_session_save_init(ps, &fbuf, fbuf.size);
	fuse_session_process_buf(ps->se, &fbuf);
	pf_session_choose_path(ps);
	if (ps->resend) {
		g_clear_pointer(&ps->left, g_ptr_array_unref);
		g_message("%s: taken over (path: resend): the kernel sends "
			  "again what the previous server left unanswered",
			  ps->name);
		pf_session_open_gate(ps);
		return TRUE;
	}
	if (!ps->inflight)
		g_warning("%s: the requests the previous server had not "
			  "answered are lost (the kernel cannot send them "
			  "again before Linux 6.9): their callers wait until "
			  "the mount goes",
			  ps->name);
	refuse_left(ps);
	g_message("%s: taken over (path: replay): the previous server left "
		  "%u %s unanswered, processed again from the session file"
		  "%s",
		  ps->name, ps->left->len,
		  ps->left->len == 1 ? "request" : "requests",
		  ps->refused->len ? " (and some refused)" : "");
	/* Before any new request: the readers wait for this. */
	g_idle_add_full(G_PRIORITY_HIGH, replay_left, ps, NULL);
	return TRUE;
}
