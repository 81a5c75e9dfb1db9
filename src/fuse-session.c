/* fuse-session.c - libfuse low-level sessions beside the GLib main loop.
 *
 * Each session has a thread that reads /dev/fuse with plain blocking reads,
 * exactly as libfuse's own loop does: a request costs one read and one
 * write, nothing more.  The core stays single-threaded all the same: one
 * lock, the loop lock, is held by the main thread at all times except while
 * it polls, and a session thread takes it to process a request.  So every
 * handler, timer, D-Bus callback and idle runs under that lock, one at a
 * time, and handlers may still park requests and answer them later from the
 * main loop.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <gio/gio.h>
#include <glib-unix.h>
#include <linux/fuse.h>

#include "powerfs/fuse-session.h"

struct pf_session {
	struct fuse_session *se;
	char *mountpoint;
	pthread_t thread;
	struct fuse_buf buf;	/* the thread's */
	GSourceFunc on_unmounted;
	gpointer on_unmounted_data;
	GQueue open_files;	/* struct pf_snapshot */
	gboolean stopped;
};

static GMutex loop_lock;

static gint poll_unlocked(GPollFD *fds, guint nfds, gint timeout)
{
	gint ret;

	g_mutex_unlock(&loop_lock);
	ret = g_poll(fds, nfds, timeout);
	g_mutex_lock(&loop_lock);
	return ret;
}

void pf_loop_lock_init(void)
{
	g_mutex_lock(&loop_lock);
	g_main_context_set_poll_func(NULL, poll_unlocked);
}

/* libfuse reports problems through its own logger, from any thread: keep
 * the last error for our one-line message at mount time and pass
 * everything to GLib's log (debug level). */
static GMutex last_error_lock;
static char *last_error;

static void log_to_glib(enum fuse_log_level level, const char *fmt,
			va_list ap)
{
	g_autofree char *msg = g_strdup_vprintf(fmt, ap);

	g_strchomp(msg);
	if (level <= FUSE_LOG_ERR) {
		g_mutex_lock(&last_error_lock);
		g_free(last_error);
		last_error = g_strdup(msg);
		g_mutex_unlock(&last_error_lock);
	}
	g_debug("libfuse: %s", msg);
}

/* The last error libfuse logged, or fallback; clears it. */
static char *take_last_error(const char *fallback)
{
	char *msg;

	g_mutex_lock(&last_error_lock);
	msg = last_error ? last_error : g_strdup(fallback);
	last_error = NULL;
	g_mutex_unlock(&last_error_lock);
	return msg;
}

/* The kernel ended the session (fusermount3 -u): tell the main loop. */
static gboolean session_ended(gpointer data)
{
	struct pf_session *ps = data;

	g_message("%s was unmounted", ps->mountpoint);
	if (ps->on_unmounted)
		ps->on_unmounted(ps->on_unmounted_data);
	return G_SOURCE_REMOVE;
}

/* Cancellation (pf_session_unmount) may only strike while the thread
 * waits in read(2) for the next request, as in libfuse's own loop: never
 * while it holds the loop lock or is inside GLib. */
static void *serve(void *data)
{
	struct pf_session *ps = data;
	int res;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	for (;;) {
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		res = fuse_session_receive_buf(ps->se, &ps->buf);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0 || fuse_session_exited(ps->se))
			break;
		g_mutex_lock(&loop_lock);
		fuse_session_process_buf(ps->se, &ps->buf);
		g_mutex_unlock(&loop_lock);
	}
	if (res < 0)
		g_warning("reading /dev/fuse: %s", g_strerror(-res));
	g_idle_add(session_ended, ps);
	return NULL;
}

/* Signals go to the main thread, whose loop handles them: a serving thread
 * starts with every asynchronous signal blocked. */
static int start_serving(struct pf_session *ps)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&ps->thread, NULL, serve, ps);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

struct pf_session *pf_session_mount(const struct fuse_lowlevel_ops *ops,
				    void *userdata, const char *mountpoint,
				    const char *mount_options,
				    GSourceFunc on_unmounted, gpointer data,
				    GError **error)
{
	struct pf_session *ps = g_new0(struct pf_session, 1);
	g_autofree char *opts = g_strdup_printf(
		"default_permissions,fsname=powerfs,subtype=powerfs%s%s",
		mount_options && *mount_options ? "," : "",
		mount_options ? mount_options : "");
	char *argv[] = { "powerfs", "-o", opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	int err;

	ps->mountpoint = g_strdup(mountpoint);
	ps->on_unmounted = on_unmounted;
	ps->on_unmounted_data = data;
	fuse_set_log_func(log_to_glib);
	g_free(take_last_error(NULL));
	ps->se = fuse_session_new(&args, ops, sizeof(*ops), userdata);
	fuse_opt_free_args(&args);
	if (!ps->se) {
		g_autofree char *why = take_last_error("rejected");

		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "bad mount options \"%s\": %s", opts, why);
		goto fail;
	}
	if (fuse_session_mount(ps->se, mountpoint) != 0) {
		g_autofree char *why = take_last_error("failed");

		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "cannot mount on %s: %s", mountpoint, why);
		goto fail;
	}
	err = start_serving(ps);
	if (err) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "cannot start a thread: %s", g_strerror(err));
		fuse_session_unmount(ps->se);
		goto fail;
	}
	return ps;
fail:
	if (ps->se)
		fuse_session_destroy(ps->se);
	g_free(ps->mountpoint);
	g_free(ps);
	return NULL;
}

static void open_file_free(struct pf_snapshot *snap)
{
	g_string_free(snap->text, TRUE);
	g_free(snap);		/* the record it is the first member of */
}

void pf_session_reply_open(struct pf_session *ps, fuse_req_t req,
			   struct fuse_file_info *fi, struct pf_snapshot *snap,
			   gboolean keep_cache)
{
	/* libfuse 3.14 has no field for FOPEN_PARALLEL_DIRECT_WRITES: the
	 * reply is written here.  Without it the kernel takes the inode lock
	 * for each write, and a second writer of a file whose write waits
	 * here (a suspend, a write queued behind one) would wait for it,
	 * uninterruptibly, before its write even reached us. */
	struct fuse_open_out out = {
		.fh = (uintptr_t)snap,
		.open_flags = FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES |
			      (keep_cache ? FOPEN_KEEP_CACHE : 0),
	};

	(void)fi;
	snap->text = g_string_sized_new(64);
	if (fuse_reply_buf(req, (const char *)&out, sizeof(out)) == -ENOENT) {
		/* The opener was interrupted; there will be no release. */
		open_file_free(snap);
		return;
	}
	snap->link.data = snap;
	g_queue_push_tail_link(&ps->open_files, &snap->link);
}

void pf_session_release(struct pf_session *ps, fuse_req_t req,
			struct fuse_file_info *fi)
{
	struct pf_snapshot *snap = (struct pf_snapshot *)(uintptr_t)fi->fh;

	g_queue_unlink(&ps->open_files, &snap->link);
	open_file_free(snap);
	fuse_reply_err(req, 0);
}

/* Called from the main thread, with the loop lock held. */
void pf_session_stop(struct pf_session *ps)
{
	if (!ps || ps->stopped)
		return;
	ps->stopped = TRUE;
	fuse_session_exit(ps->se);
	/* Let a request in progress finish and stop the thread where it
	 * waits for the next one. */
	g_mutex_unlock(&loop_lock);
	pthread_cancel(ps->thread);
	pthread_join(ps->thread, NULL);
	g_mutex_lock(&loop_lock);
}

void pf_session_unmount(struct pf_session *ps)
{
	GList *l;

	if (!ps)
		return;
	/* Unmounting closes /dev/fuse: the thread must be gone first (a
	 * read blocked on it would fail with ECONNABORTED). */
	pf_session_stop(ps);
	fuse_session_unmount(ps->se);
	/* A session_ended() idle may still be queued for us. */
	while (g_idle_remove_by_data(ps))
		;
	fuse_session_destroy(ps->se);
	/* Files still open when the connection ended get no release. */
	while ((l = g_queue_pop_head_link(&ps->open_files)))
		open_file_free(l->data);
	free(ps->buf.mem);
	g_free(ps->mountpoint);
	g_free(ps);
}

void pf_session_init_conn(struct fuse_conn_info *conn)
{
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
