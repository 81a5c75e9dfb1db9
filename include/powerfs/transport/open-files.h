/* open-files.h - a session's open files (open-files.c): the per-open
 * records the session keeps under the handles it gives out, and the
 * snapshot reads served from them. */
#ifndef POWERFS_OPEN_FILES_H
#define POWERFS_OPEN_FILES_H

#include <glib.h>
#include "powerfs/transport/libfuse.h"

struct pf_session;

/* Per-open content, as sysfs keeps it: generated when a read starts at
 * offset 0 or anywhere but where the last read ended, which is served from
 * the snapshot instead. */
struct pf_snapshot {
	GString *text;
	gboolean valid;
	off_t end;  /* where the last read ended */
	guint64 fh; /* its handle, as the kernel knows it */
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
