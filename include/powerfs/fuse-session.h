/* fuse-session.h - libfuse low-level sessions served beside the GLib main
 * loop, shared by the main mount (fs.c) and /sys/class/wakeup
 * (class-wakeup.c). */
#ifndef POWERFS_FUSE_SESSION_H
#define POWERFS_FUSE_SESSION_H

#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <glib.h>

struct pf_session;

/* Call once, from the main thread, before the first mount: from then on the
 * main thread holds the loop lock except while the loop polls. */
void pf_loop_lock_init(void);

/* Mounts with "default_permissions" plus mount_options (may be NULL) and
 * serves requests from a thread of its own, under the loop lock.
 * on_unmounted (may be NULL) runs in the main loop when the kernel ends the
 * session. */
struct pf_session *pf_session_mount(const struct fuse_lowlevel_ops *ops,
				    void *userdata, const char *mountpoint,
				    const char *mount_options,
				    GSourceFunc on_unmounted, gpointer data,
				    GError **error);
/* Takes no more requests (those parked earlier can still be answered):
 * nothing changes after this but what the caller does. */
void pf_session_stop(struct pf_session *ps);
/* Stops if need be, unmounts and frees. */
void pf_session_unmount(struct pf_session *ps);

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
	GList link;		/* in the session's open files */
};

/* Answer an open: the file is served direct_io, so read(2) and its kin
 * always reach the server, and snap, the first member of a g_malloc'ed
 * per-open record, becomes its handle (fi->fh).  The session frees the
 * record at release, or at unmount if the connection ends before a release
 * comes.  sendfile(2) and splice(2) still read through the page cache
 * (Linux 6.5 and later): without keep_cache the kernel drops the file's
 * cached pages at this open. */
void pf_session_reply_open(struct pf_session *ps, fuse_req_t req,
			   struct fuse_file_info *fi, struct pf_snapshot *snap,
			   gboolean keep_cache);
void pf_session_release(struct pf_session *ps, fuse_req_t req,
			struct fuse_file_info *fi);
gboolean pf_snapshot_continues(const struct pf_snapshot *snap, off_t off);
void pf_snapshot_reply(fuse_req_t req, struct pf_snapshot *snap, size_t size,
		       off_t off);

#endif
