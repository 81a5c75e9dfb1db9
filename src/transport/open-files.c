/* open-files.c - a session's open files: the handles it gives out at open,
 * the per-open records (struct pf_snapshot) it keeps under them, and the
 * snapshot reads that serve a file's content from them as sysfs does.
 */
#include <errno.h>
#include <glib.h>
#include <linux/fuse.h>

#include "powerfs/transport/open-files.h"
#include "session-internal.h"

static void open_file_free(gpointer data)
{
	struct pf_snapshot *snap = data;

	g_string_free(snap->text, TRUE);
	g_free(snap); /* the record it is the first member of */
}

GHashTable *pf_session_open_files_new(void)
{
	return g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL,
				     open_file_free);
}

void pf_session_reply_open(struct pf_session *ps, fuse_req_t req,
			   struct fuse_file_info *fi, struct pf_snapshot *snap,
			   gboolean keep_cache)
{
	/* libfuse 3.14 has no field for FOPEN_PARALLEL_DIRECT_WRITES: the
	 * reply is written here.  Without it the kernel takes the inode lock
	 * for each write, and a second writer of a file whose write waits
	 * here (a suspend, a write queued behind one) would wait for it,
	 * uninterruptibly, before its write even reached us.
	 * FOPEN_NOFLUSH for the same reason at close(2): there is nothing to
	 * flush, and Linux 6.1's fuse_flush() takes the inode lock
	 * exclusively, so a reader of state closing its fd would wait, in D
	 * state, for a write of state that is suspending. */
	struct fuse_open_out out = {
		.fh = ps->next_fh++,
		.open_flags = FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES |
			      FOPEN_NOFLUSH |
			      (keep_cache ? FOPEN_KEEP_CACHE : 0),
	};

	(void)fi;
	snap->text = g_string_sized_new(64);
	snap->fh = out.fh;
	if (fuse_reply_buf(req, (const char *)&out, sizeof(out)) == -ENOENT) {
		/* The opener was interrupted; there will be no release. */
		open_file_free(snap);
		return;
	}
	g_hash_table_insert(ps->open_files, &snap->fh, snap);
}

struct pf_snapshot *pf_session_open_file(struct pf_session *ps,
					 const struct fuse_file_info *fi,
					 fuse_ino_t ino)
{
	struct pf_snapshot *snap = g_hash_table_lookup(ps->open_files, &fi->fh);

	if (snap)
		return snap;
	/* A file an earlier server opened. */
	snap = ps->adopt(ps->userdata, ino);
	snap->text = g_string_sized_new(64);
	snap->fh = fi->fh;
	g_hash_table_insert(ps->open_files, &snap->fh, snap);
	return snap;
}

void pf_session_release(struct pf_session *ps, fuse_req_t req,
			struct fuse_file_info *fi)
{
	g_hash_table_remove(ps->open_files, &fi->fh);
	fuse_reply_err(req, 0);
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
