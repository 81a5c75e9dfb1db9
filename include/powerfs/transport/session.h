/* session.h - libfuse low-level sessions served beside the GLib main
 * loop, shared by the main mount (fs.c) and /sys/class/wakeup
 * (class-wakeup.c). */
#ifndef POWERFS_SESSION_H
#define POWERFS_SESSION_H

#include <glib.h>
#include "powerfs/transport/libfuse.h"

struct pf_session;

/* Call once, from the main thread, before the first session: from then on
 * the main thread holds the loop lock except while the loop polls. */
void pf_loop_lock_init(void);

/* A record for a file that an earlier server opened (its handle is not in
 * this server's table): a g_malloc'ed per-open record whose first member
 * is a struct pf_snapshot, for inode ino. */
struct pf_snapshot;
typedef struct pf_snapshot *(*pf_session_adopt_func)(void *userdata,
						     fuse_ino_t ino);

/* Serves the connection on fuse_fd (a copy of it) from a thread of its own,
 * under the loop lock.  session_fd (a memfd the keeper holds, or -1) keeps
 * the connection's INIT request: if it holds one, this server takes the
 * connection over (see session.c).  on_unmounted (may be NULL) runs in
 * the main loop when the kernel ends the connection. */
struct pf_session *pf_session_serve(const struct fuse_lowlevel_ops *ops,
				    void *userdata, int fuse_fd,
				    int session_fd, const char *name,
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

/* Fill in the handlers that create, remove or rename entries: a fixed tree
 * refuses them (create and mknod: EACCES; the rest: EPERM). */
void pf_session_refuse_changes(struct fuse_lowlevel_ops *ops);

/* Per-open content, as sysfs keeps it: generated when a read starts at
 * offset 0 or anywhere but where the last read ended, which is served from
 * the snapshot instead. */
struct pf_snapshot {
	GString *text;
	gboolean valid;
	off_t end;		/* where the last read ended */
	guint64 fh;		/* its handle, as the kernel knows it */
};

/* Answer an open: the file is served direct_io, so read(2) and its kin
 * always reach the server, and snap, the first member of a g_malloc'ed
 * per-open record, gets a handle and becomes the open file's record
 * (pf_session_open_file()).  The session frees the record at release, or
 * when it is freed.  sendfile(2) and splice(2) still read through the page
 * cache (Linux 6.5 and later): without keep_cache the kernel drops the
 * file's cached pages at this open. */
void pf_session_reply_open(struct pf_session *ps, fuse_req_t req,
			   struct fuse_file_info *fi, struct pf_snapshot *snap,
			   gboolean keep_cache);
/* The record of the open file of a request (adopted if need be). */
struct pf_snapshot *pf_session_open_file(struct pf_session *ps,
					 const struct fuse_file_info *fi,
					 fuse_ino_t ino);
void pf_session_release(struct pf_session *ps, fuse_req_t req,
			struct fuse_file_info *fi);
gboolean pf_snapshot_continues(const struct pf_snapshot *snap, off_t off);
void pf_snapshot_reply(fuse_req_t req, struct pf_snapshot *snap, size_t size,
		       off_t off);

#endif
