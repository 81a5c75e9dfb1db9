/* fs.h - the FUSE side: serves the attribute table on a mount point from the
 * GLib main loop. */
#ifndef POWERFS_FS_H
#define POWERFS_FS_H

#include <sys/types.h>
#include <glib.h>
#include "powerfs/sysfs/attrs.h"
#include "powerfs/engine/power.h"
#include "powerfs/sysfs/owners.h"

struct pf_fs;

/* Serves the n_attrs rows of attrs (pf_attrs(), or another directory's
 * table) on the mount whose connection is fuse_fd (session_fd: see
 * pf_session_serve()) from the thread-default main context.  The files'
 * modes and owners are added to owners (NULL: the mount's own, which
 * nobody saves), which must outlive the mount.  on_unmounted
 * (may be NULL) runs when the kernel ends the connection (fusermount3
 * -u).  When the system sleeps, waiting requests are answered (see
 * PF_EVENT_SLEEPING). */
struct pf_fs *pf_fs_serve(struct power *pw, const struct pf_attr *attrs,
			  guint n_attrs, struct pf_owners *owners, int fuse_fd,
			  int session_fd, const char *mountpoint,
			  gboolean debug, GSourceFunc on_unmounted,
			  gpointer data, GError **error);

/* func runs before a write or a setattr is answered (the state file writes
 * what the request changed: a crash after the answer must not lose it). */
void pf_fs_set_before_reply(struct pf_fs *fs, wakeup_func func, gpointer data);

/* Takes no more requests (at shutdown, before the state is saved). */
void pf_fs_stop(struct pf_fs *fs);

/* Fails every parked request (blocked readers get EINTR, pending writes
 * EIO), or, handing over to a successor, leaves them for the kernel to send
 * again; stops serving and frees. */
void pf_fs_free(struct pf_fs *fs, gboolean hand_over);

#endif
