/* fuse-session.c - a libfuse low-level session in the GLib main loop.
 *
 * The session's /dev/fuse fd is watched by the loop; each wake-up reads and
 * processes one request, so timers, D-Bus and other sessions interleave
 * with requests on one thread.  The fd is non-blocking: a request can vanish
 * between poll and read (its caller died), and the loop must never block.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <gio/gio.h>
#include <glib-unix.h>

#include "powerfs/fuse-session.h"

struct pf_session {
	struct fuse_session *se;
	char *mountpoint;
	guint fd_watch;
	struct fuse_buf buf;
	GSourceFunc on_unmounted;
	gpointer on_unmounted_data;
};

/* libfuse reports problems through its own logger: keep the last error for
 * our one-line message and pass everything to GLib's log (debug level). */
static char *last_error;

static void log_to_glib(enum fuse_log_level level, const char *fmt,
			va_list ap)
{
	g_autofree char *msg = g_strdup_vprintf(fmt, ap);

	g_strchomp(msg);
	if (level <= FUSE_LOG_ERR) {
		g_free(last_error);
		last_error = g_strdup(msg);
	}
	g_debug("libfuse: %s", msg);
}

static gboolean on_readable(gint fd, GIOCondition cond, gpointer data)
{
	struct pf_session *ps = data;
	int res;

	(void)fd;
	(void)cond;
	res = fuse_session_receive_buf(ps->se, &ps->buf);
	if (res == -EINTR || res == -EAGAIN)
		return G_SOURCE_CONTINUE;
	if (res <= 0 || fuse_session_exited(ps->se)) {
		if (res < 0)
			g_warning("reading /dev/fuse: %s", g_strerror(-res));
		g_message("%s was unmounted", ps->mountpoint);
		ps->fd_watch = 0;
		if (ps->on_unmounted)
			ps->on_unmounted(ps->on_unmounted_data);
		return G_SOURCE_REMOVE;
	}
	fuse_session_process_buf(ps->se, &ps->buf);
	return G_SOURCE_CONTINUE;
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
	int fd;

	ps->mountpoint = g_strdup(mountpoint);
	ps->on_unmounted = on_unmounted;
	ps->on_unmounted_data = data;
	fuse_set_log_func(log_to_glib);
	g_clear_pointer(&last_error, g_free);
	ps->se = fuse_session_new(&args, ops, sizeof(*ops), userdata);
	fuse_opt_free_args(&args);
	if (!ps->se) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "bad mount options \"%s\": %s", opts,
			    last_error ? last_error : "rejected");
		goto fail;
	}
	if (fuse_session_mount(ps->se, mountpoint) != 0) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "cannot mount on %s: %s", mountpoint,
			    last_error ? last_error : "failed");
		goto fail;
	}
	fd = fuse_session_fd(ps->se);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	ps->fd_watch = g_unix_fd_add(fd, G_IO_IN | G_IO_ERR | G_IO_HUP,
				     on_readable, ps);
	g_clear_pointer(&last_error, g_free);
	return ps;
fail:
	g_clear_pointer(&last_error, g_free);
	if (ps->se)
		fuse_session_destroy(ps->se);
	g_free(ps->mountpoint);
	g_free(ps);
	return NULL;
}

void pf_session_unmount(struct pf_session *ps)
{
	if (!ps)
		return;
	if (ps->fd_watch)
		g_source_remove(ps->fd_watch);
	fuse_session_unmount(ps->se);
	fuse_session_destroy(ps->se);
	free(ps->buf.mem);
	g_free(ps->mountpoint);
	g_free(ps);
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
