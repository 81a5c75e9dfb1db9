/* session.c - serving a FUSE connection beside the GLib main loop: a
 * session's life, from the descriptor it is given to its end.
 *
 * A session reads requests in threads of its own (readers.c) and processes
 * them under the loop lock (loop-lock.c), takes over a connection an
 * earlier server left (take-over.c), and keeps the files the kernel has
 * open (open-files.c).  The connection is mounted apart (mount.c) and may
 * outlive every session (keeper.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <gio/gio.h>

#include "powerfs/transport/inflight.h"
#include "powerfs/transport/loop-lock.h"
#include "powerfs/transport/mount.h"
#include "session-internal.h"

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
	pf_session_unregister(ps);
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
				    void *userdata, int fuse_fd, int session_fd,
				    const char *name,
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
	ps->open_files = pf_session_open_files_new();
	/* Handles of earlier servers are not taken for ours. */
	ps->next_fh = (guint64)g_random_int() << 32 | 1;
	pf_mount_log_libfuse();
	ps->se = fuse_session_new(&args, ops, sizeof(*ops), userdata);
	fuse_opt_free_args(&args);
	g_mutex_init(&ps->gate_lock);
	g_cond_init(&ps->gate_cond);
	/* The keeper says whether the previous server crashed (rather than
	 * being killed from outside or handing over). */
	ps->inflight = pf_inflight_open(
		session_fd, name, g_getenv("POWERFS_SERVER_CRASHED") != NULL,
		&ps->left, &ps->refused);
	if (fd < 0 || !ps->se ||
	    fuse_session_custom_io(ps->se, &pf_session_io, fd) != 0 ||
	    !pf_session_register(ps)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "%s: cannot serve /dev/fuse descriptor %d", name,
			    fuse_fd);
		/* The session closes it only once it uses it. */
		if (fd >= 0 && (!ps->se || fuse_session_fd(ps->se) != fd))
			close(fd);
		goto fail;
	}
	if (!pf_session_take_over(ps, error))
		goto fail;
	err = pf_session_start_readers(ps);
	if (err) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "cannot start a thread: %s", g_strerror(err));
		/* Readers that started may be processing: let them finish
		 * (the caller holds the loop lock). */
		fuse_session_exit(ps->se);
		pf_loop_lock_release();
		pf_session_stop_readers(ps);
		pf_loop_lock_take();
		while (g_idle_remove_by_data(ps))
			;
		goto fail;
	}
	return ps;
fail:
	session_destroy(ps);
	return NULL;
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
	pf_loop_lock_release();
	pf_session_stop_readers(ps);
	pf_loop_lock_take();
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
