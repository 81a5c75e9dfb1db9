/* mount.c - mounting a FUSE file system through libfuse, and lifting a
 * mount (see mount.h).
 *
 * A session made only to mount is never served: the connection's
 * descriptor is handed to whoever serves it (session.c), in this process
 * or, through the keeper, in its servers.
 */
#include <errno.h>
#include <sys/mount.h>
#include <gio/gio.h>

#include "powerfs/transport/libfuse.h"
#include "powerfs/transport/mount.h"

struct pf_mount {
	struct fuse_session *se; /* for the mount only: never served */
	char *mountpoint;
};

/* libfuse reports problems through its own logger, from any thread: the
 * last error is kept for our one-line message at mount time, and
 * everything goes to GLib's log (debug level). */
static GMutex last_error_lock;
static char *last_error;

static void log_to_glib(enum fuse_log_level level, const char *fmt, va_list ap)
{
	g_autofree char *msg = g_strdup_vprintf(fmt, ap);

	if (level <= FUSE_LOG_ERR) {
		/* libfuse logs some messages in pieces ("unknown option(s):
		 * `", the options, "'\n"): a piece without a newline is
		 * continued by the next. */
		g_mutex_lock(&last_error_lock);
		if (last_error && !g_str_has_suffix(last_error, "\n")) {
			char *joined = g_strconcat(last_error, msg, NULL);

			g_free(last_error);
			last_error = joined;
		} else {
			g_free(last_error);
			last_error = g_strdup(msg);
		}
		g_mutex_unlock(&last_error_lock);
	}
	g_debug("libfuse: %s", g_strchomp(msg));
}

/* The last error libfuse logged, or fallback; clears it. */
static char *take_last_error(const char *fallback)
{
	char *msg;

	g_mutex_lock(&last_error_lock);
	msg = last_error ? g_strchomp(last_error) : g_strdup(fallback);
	last_error = NULL;
	g_mutex_unlock(&last_error_lock);
	return msg;
}

void pf_mount_log_libfuse(void)
{
	fuse_set_log_func(log_to_glib);
}

struct pf_mount *pf_mount_new(const char *mountpoint, const char *options,
			      GError **error)
{
	static const struct fuse_lowlevel_ops no_ops;
	g_autofree char *opts = g_strdup_printf(
		"default_permissions,fsname=powerfs,subtype=powerfs%s%s",
		options && *options ? "," : "", options ? options : "");
	char *argv[] = { "powerfs", "-o", opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct pf_mount *m = g_new0(struct pf_mount, 1);

	pf_mount_log_libfuse();
	g_free(take_last_error(NULL));
	m->se = fuse_session_new(&args, &no_ops, sizeof(no_ops), NULL);
	fuse_opt_free_args(&args);
	if (!m->se) {
		g_autofree char *why = take_last_error("rejected");

		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "bad mount options \"%s\": %s", opts, why);
		g_free(m);
		return NULL;
	}
	if (fuse_session_mount(m->se, mountpoint) != 0) {
		g_autofree char *why = take_last_error("failed");

		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "cannot mount on %s: %s", mountpoint, why);
		fuse_session_destroy(m->se);
		g_free(m);
		return NULL;
	}
	m->mountpoint = g_strdup(mountpoint);
	return m;
}

int pf_mount_fd(const struct pf_mount *m)
{
	return fuse_session_fd(m->se);
}

void pf_mount_free(struct pf_mount *m, gboolean unmount)
{
	if (!m)
		return;
	if (unmount)
		fuse_session_unmount(m->se);
	fuse_session_destroy(m->se);
	g_free(m->mountpoint);
	g_free(m);
}

gboolean pf_mount_detach(const char *path)
{
	const char *argv[] = { "fusermount3", "-uz", path, NULL };
	gint status = -1;

	if (umount2(path, MNT_DETACH) == 0)
		return TRUE;
	return g_spawn_sync(NULL, (char **)argv, NULL,
			    G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL |
				    G_SPAWN_STDERR_TO_DEV_NULL,
			    NULL, NULL, NULL, NULL, &status, NULL) &&
	       g_spawn_check_wait_status(status, NULL);
}
