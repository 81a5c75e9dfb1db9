/* session.h - libfuse low-level sessions served beside the GLib main
 * loop, shared by the main mount (fs.c) and /sys/class/wakeup
 * (class-wakeup.c).  Their open files: open-files.h. */
#ifndef POWERFS_SESSION_H
#define POWERFS_SESSION_H

#include <glib.h>
#include "powerfs/transport/libfuse.h"

struct pf_session;
struct pf_snapshot;

/* A record for a file that an earlier server opened (its handle is not in
 * this server's table): a g_malloc'ed per-open record whose first member
 * is a struct pf_snapshot, for inode ino. */
typedef struct pf_snapshot *(*pf_session_adopt_func)(void *userdata,
						     fuse_ino_t ino);

/* Serves the connection on fuse_fd (a copy of it) from a thread of its own,
 * under the loop lock.  session_fd (a memfd the keeper holds, or -1) keeps
 * the connection's INIT request: if it holds one, this server takes the
 * connection over (see take-over.c).  on_unmounted (may be NULL) runs in
 * the main loop when the kernel ends the connection. */
struct pf_session *pf_session_serve(const struct fuse_lowlevel_ops *ops,
				    void *userdata, int fuse_fd, int session_fd,
				    const char *name,
				    pf_session_adopt_func adopt,
				    GSourceFunc on_unmounted, gpointer data,
				    GError **error);
/* Takes no more requests (those parked earlier can still be answered):
 * nothing changes after this but what the caller does. */
void pf_session_stop(struct pf_session *ps);
/* TRUE while the session processes a request a dead server had read and
 * not answered: sent again by the kernel (Linux 6.9 and later), or
 * processed again from its copy (before; see inflight.c). */
gboolean pf_session_replaying(const struct pf_session *ps);
/* Stops if need be and frees; the connection lives on in other copies of
 * its descriptor (the keeper's, or pf_mount's). */
void pf_session_free(struct pf_session *ps);

/* The connection settings both mounts want, from their init handler. */
void pf_session_init_conn(struct fuse_conn_info *conn);

#endif
