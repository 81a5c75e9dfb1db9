/* fs.c - the FUSE side of powerfs: inodes, open files, reads and writes.
 *
 * The low-level libfuse API (session.c): one request at a time is
 * handled under the loop lock, so the core needs no locks of its own.  A
 * request that must wait (a wakeup_count read while a wakeup source is
 * active, a state write while the system "sleeps") is parked: its fuse_req_t
 * is kept and answered later from the main loop, and everyone else goes on
 * being served.
 *
 * Files behave like sysfs files: a read at offset 0 (or at an offset the open
 * file has no snapshot for) generates the content, a read that continues where
 * the last one ended is served from that snapshot, and every write(2) is one
 * whole command whatever the file offset.  wakeup_sources, a debugfs file in
 * the kernel, is printed a row at a time as seq_file prints it.
 *
 * Each name has one inode for the life of the mount, numbered after its path
 * (INO_NAMED), as a sysfs file has one: /proc/PID/fd links keep their path,
 * inotify watches see what every process does, fstat(fd) is stat(path), and
 * a path walk costs no request once the kernel knows the name.
 *
 * All files are opened direct_io, so read(2) and its kin always reach us.
 * The page cache reads them all the same for sendfile(2) and splice(2)
 * (Linux 6.5 and later, whatever the open asked; before, these take the
 * read(2) path) and for a private mmap.  Such a read keeps its page locked
 * while its request is out, and every opener of the inode shares the page:
 * a short answer sets the inode's size to it, which any attribute update
 * meanwhile (a write, a stat, a lookup by another process) either undoes,
 * so that the rest of the page comes out as zeros, or leaves behind, so that
 * longer content later is cut; and the next reader may be given the page
 * without being asked.  So no read through the page cache is ever answered
 * with data: it fails at once with EINVAL, as sendfile and splice of a
 * debugfs file do on the kernel, and busybox cat, Python's shutil and
 * toybox's copies read(2) then.  No page is ever filled or waited for long,
 * and the size the kernel holds never falls below what we reported, or
 * sendfile would return end of file without asking (O_TRUNC comes as a
 * truncation whose answer gives the size back, not with the open).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "powerfs/sysfs/attrs.h"
#include "powerfs/sysfs/fs.h"
#include "powerfs/sysfs/owners.h"
#include "powerfs/transport/open-files.h"
#include "powerfs/transport/refuse.h"
#include "powerfs/transport/session.h"

/* The names never change while mounted, and every change of attributes
 * comes through a request whose answer carries them, or makes the kernel
 * ask again (a read invalidates atime): the kernel may keep both.  Only a
 * size that bounds content (wakeup_sources) moves by itself. */
#define ATTR_SECONDS 3600.0
#define ENTRY_SECONDS 3600.0

/* Inode numbers.  The root's is FUSE_ROOT_ID; every other node's is
 * INO_NAMED over a hash of its path, the same in every version of powerfs
 * whatever the order of the attribute table, so that a server that takes a
 * mount over (after a crash, or in a live upgrade to a version with more
 * files) finds the same files behind the inodes the kernel holds.  A number
 * without INO_NAMED is a former server's: the file's place in the table of
 * those versions (legacy_paths) in its low LEGACY_SHIFT bits, under a
 * serial where every lookup of a file gave a new number.  A number that
 * names no file here (a later version's file, after a downgrade) is
 * ESTALE. */
#define INO_NAMED (G_GUINT64_CONSTANT(1) << 62)
#define INO_HASH_MASK ((G_GUINT64_CONSTANT(1) << 48) - 1)
#define LEGACY_SHIFT 8

/* The paths in the order of the table of the versions before INO_NAMED:
 * number N (N >= 2) was row N - 2. */
static const char *const legacy_paths[] = {
	"state",
	"wakeup_count",
	"autosleep",
	"wake_lock",
	"wake_unlock",
	"wakeup_sources",
	"suspend_stats",
	"suspend_stats/success",
	"suspend_stats/fail",
	"suspend_stats/failed_freeze",
	"suspend_stats/failed_prepare",
	"suspend_stats/failed_suspend",
	"suspend_stats/failed_suspend_late",
	"suspend_stats/failed_suspend_noirq",
	"suspend_stats/failed_resume",
	"suspend_stats/failed_resume_early",
	"suspend_stats/failed_resume_noirq",
	"suspend_stats/last_failed_dev",
	"suspend_stats/last_failed_errno",
	"suspend_stats/last_failed_step",
};

struct node {
	const struct pf_attr *attr; /* NULL for the root */
	struct node *parent;	    /* NULL for the root */
	fuse_ino_t ino;
	gboolean absent;	/* not served here (pf_attr_present()) */
	struct pf_owner *owner; /* its mode and owner (owners.h) */
	nlink_t nlink;
	struct timespec atime, mtime, ctime;
	/* Times were set since the mount (kernfs keeps an inode's times
	 * apart once a setattr made it: all three start at that moment). */
	gboolean times_kept;
};

struct open_file {
	struct pf_snapshot snap; /* first: the session frees the record */
	struct node *node;
	guint row;	      /* show_rows files: the next row to print */
	gsize seq_size;	      /* show_rows files: seq_file's buffer size */
	gboolean pending_row; /* snap holds a whole row not yet returned */
};

struct pf_fs {
	struct power *pw;
	struct pf_session *session;
	gboolean debug;
	struct pf_owners *owners;
	struct pf_owners *own_owners; /* if the caller gave none */
	struct pf_owner root_owner;
	struct node *nodes; /* the root, then the table's rows */
	guint n_nodes;
	GHashTable *by_ino; /* INO_NAMED numbers -> struct node */
	struct node *legacy[G_N_ELEMENTS(legacy_paths)];
	GQueue parked;	    /* struct parked: waiting for the core */
	GQueue answered;    /* struct parked: answered early, core pending */
	GQueue interrupted; /* struct parked: to be answered EINTR */
	guint interrupt_idle;
	struct parked *spare;	  /* for the next write */
	GString *scratch;	  /* for printing rows */
	wakeup_func before_reply; /* to a request that changes things */
	gpointer before_reply_data;
	/* The host sleeps, its tasks frozen or about to be: no request may
	 * wait here until it resumed. */
	gboolean host_asleep;
};

struct parked {
	struct pf_fs *fs;
	fuse_req_t req;
	GList link;
	/* A read waiting for no wakeup event in progress: */
	struct wakeup_waiter *waiter;
	struct open_file *of;
	size_t size;
	off_t off;
	/* A write waiting for the core: its length. */
	gsize len;
	/* In fs->interrupted, a write to be answered with len from the loop
	 * (see parked_write_interrupted()), not with EINTR. */
	gboolean early;
};

static char *node_path(struct pf_fs *fs, const struct node *n);

static struct pf_fs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The node of an inode number, or NULL (see INO_NAMED). */
static struct node *node_get(struct pf_fs *fs, fuse_ino_t ino)
{
	guint64 row;

	if (ino == FUSE_ROOT_ID)
		return &fs->nodes[0];
	if (ino & INO_NAMED)
		return g_hash_table_lookup(fs->by_ino, &ino);
	row = ino & ((1u << LEGACY_SHIFT) - 1);
	return row >= 2 && row - 2 < G_N_ELEMENTS(fs->legacy) ?
		       fs->legacy[row - 2] :
		       NULL;
}

static double attr_seconds(const struct node *n)
{
	return n->attr && n->attr->size_bound ? 0.0 : ATTR_SECONDS;
}

/* The node is about to have times set: as kernfs does at a node's first
 * setattr, all three start at now. */
static void node_keep_times(struct node *n, const struct timespec *now)
{
	if (n->times_kept)
		return;
	n->times_kept = TRUE;
	n->atime = n->mtime = n->ctime = *now;
}

static gboolean ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* The kernel's sendfile(2) marks the file accessed, whether or not the
 * file could be spliced, and splice(2) of a sysfs file does too; sysfs
 * and debugfs are mounted relatime: atime moves while it is not newer than
 * mtime or ctime, or once a day. */
static void node_accessed(struct node *n)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	if (!ts_before(&n->mtime, &n->atime) ||
	    !ts_before(&n->ctime, &n->atime) ||
	    now.tv_sec - n->atime.tv_sec >= 24 * 60 * 60)
		n->atime = now;
}

static const char *node_name(const struct node *n)
{
	return n->attr ? n->attr->name : "/";
}

static void node_stat(struct pf_fs *fs, const struct node *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_mode = n->owner->mode;
	st->st_nlink = n->nlink;
	st->st_uid = n->owner->uid;
	st->st_gid = n->owner->gid;
	if (!n->attr)
		st->st_size = 0;
	else if (n->attr->size_bound)
		st->st_size = n->attr->size_bound(fs->pw);
	else
		st->st_size = n->attr->size;
	st->st_blksize = 4096;
	st->st_atim = n->atime;
	st->st_mtim = n->mtime;
	st->st_ctim = n->ctime;
}

void pf_fs_set_before_reply(struct pf_fs *fs, wakeup_func func, gpointer data)
{
	fs->before_reply = func;
	fs->before_reply_data = data;
}

static void before_reply(struct pf_fs *fs)
{
	if (fs->before_reply)
		fs->before_reply(fs->before_reply_data);
}

static void reply_entry(fuse_req_t req, const struct node *n)
{
	struct pf_fs *fs = req_fs(req);
	struct fuse_entry_param e = {
		.ino = n->ino,
		.attr_timeout = attr_seconds(n),
		.entry_timeout = ENTRY_SECONDS,
	};

	node_stat(fs, n, &e.attr);
	fuse_reply_entry(req, &e);
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct pf_fs *fs = req_fs(req);
	const struct node *dir = node_get(fs, parent);

	if (!dir) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	for (guint i = 1; i < fs->n_nodes; i++)
		if (fs->nodes[i].parent == dir && !fs->nodes[i].absent &&
		    !strcmp(fs->nodes[i].attr->name, name)) {
			reply_entry(req, &fs->nodes[i]);
			return;
		}
	fuse_reply_err(req, ENOENT);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	const struct node *n = node_get(req_fs(req), ino);
	struct stat st;

	(void)fi;
	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	node_stat(req_fs(req), n, &st);
	fuse_reply_attr(req, &st, attr_seconds(n));
}

/* chown and chmod persist (Android's init relies on it); the kernel has
 * already checked that the caller may (default_permissions).  Times are
 * kept as kernfs keeps them; a truncation (O_TRUNC too) changes nothing
 * but them, as in sysfs: mtime and ctime move.  Every setattr moves ctime. */
static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct pf_fs *fs = req_fs(req);
	struct node *n = node_get(fs, ino);
	struct timespec now;
	struct stat st;

	(void)fi;
	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	node_keep_times(n, &now);
	n->ctime = now;
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		n->atime = now;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		n->atime = attr->st_atim;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		n->mtime = now;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		n->mtime = attr->st_mtim;
	else if (to_set & FUSE_SET_ATTR_SIZE)
		n->mtime = now;
	if (to_set & FUSE_SET_ATTR_MODE)
		n->owner->mode =
			(n->owner->mode & S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID)
		n->owner->uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		n->owner->gid = attr->st_gid;
	if (to_set &
	    (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		g_info("%s: mode %04o owner %u:%u", node_name(n),
		       n->owner->mode & 07777, n->owner->uid, n->owner->gid);
		/* The state file keeps it. */
		wakeup_notify_changed(fs->pw->engine, NULL);
	}
	node_stat(fs, n, &st);
	before_reply(fs);
	fuse_reply_attr(req, &st, attr_seconds(n));
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pf_fs *fs = req_fs(req);
	struct node *n = node_get(fs, ino);
	struct open_file *of;

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (S_ISDIR(n->owner->mode)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	/* Even root may not open a file without a store for writing. */
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		int err = pf_attr_write_denied(n->attr, fs->pw);

		if (err) {
			fuse_reply_err(req, err);
			return;
		}
	}
	/* sysfs and debugfs files have no direct I/O: the kernel refuses
	 * O_DIRECT once the file is open. */
	if (fi->flags & O_DIRECT) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	of = g_new0(struct open_file, 1);
	of->node = n;
	/* The page cache holds nothing of ours (see the top of this file):
	 * there is nothing to drop, and dropping would lock pages. */
	pf_session_reply_open(fs->session, req, fi, &of->snap, TRUE);
}

static void fs_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)ino;
	pf_session_release(req_fs(req)->session, req, fi);
}

static void park_read(struct pf_fs *fs, fuse_req_t req, struct open_file *of,
		      size_t size, off_t off);
static void reply_store(fuse_req_t req, gssize result);

/* Generate the content and answer from it, or park until it can be. */
static void read_fresh(struct pf_fs *fs, fuse_req_t req, struct open_file *of,
		       size_t size, off_t off)
{
	int ret;

	g_string_truncate(of->snap.text, 0);
	of->snap.valid = FALSE;
	ret = pf_attr_show(of->node->attr, fs->pw, of->snap.text);
	if (ret == -EAGAIN && fs->host_asleep) {
		/* A reader that comes back while the host sleeps (GNU and
		 * busybox cat, Python: all retry after the EINTR they got
		 * when the sleep began) must not wait here: the host's
		 * freezer cannot freeze a task inside a FUSE request, and
		 * powerfs is frozen too.  EINTR again would have it retry in
		 * a loop, always a request in flight when the freezer comes
		 * (the VM check failed so every run).  It gets the count: a
		 * write of it fails with EINVAL while the event is in
		 * progress, so the handshake stays safe. */
		ret = 0;
	}
	if (ret == -EAGAIN) {
		park_read(fs, req, of, size, off);
		return;
	}
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	of->snap.valid = TRUE;
	if (of->node->attr->read_by) {
		const struct fuse_ctx *ctx = fuse_req_ctx(req);
		struct pf_caller caller = { ctx->pid, ctx->uid, ctx->gid };

		of->node->attr->read_by(fs->pw, &caller, of->snap.text);
	}
	pf_snapshot_reply(req, &of->snap, size, off);
}

/* The kernel's seq_file buffer: one page to start with, doubled for a row
 * that does not fit (and kept doubled for the open file). */
#define SEQ_BUF_SIZE 4096

/* A row listing (wakeup_sources), read as the kernel's seq_file reads:
 * first the rest of the row a previous read (or the offset) left off in,
 * then, if the read wants more, a fresh buffer of whole rows, filled while
 * it holds less than the read wants and the next row fits (a row fits when
 * the buffer stays below its size).  So one read(2) returns about a page
 * whatever its size (the oracle kernel: 4065 bytes for a read of 1 MiB,
 * 128 KiB or 5000), and no request prints more than a page or two however
 * long the listing is.  Only where the read stopped is kept: the next row,
 * and the rest of the last row printed or a whole row that did not fit
 * (as seq_file keeps them), so neither memory per open file nor the work
 * of a read grows with the listing. */
static void read_rows(struct pf_fs *fs, fuse_req_t req, struct open_file *of,
		      size_t size, off_t off)
{
	const struct pf_attr *attr = of->node->attr;
	GString *out = fs->scratch;
	gboolean pending = FALSE;
	gsize left, n, fresh, trim_at = 0;

	if (!of->seq_size)
		of->seq_size = SEQ_BUF_SIZE;
	g_string_truncate(out, 0);
	if (pf_snapshot_continues(&of->snap, off)) {
		g_string_append_len(out, of->snap.text->str,
				    of->snap.text->len);
		pending = of->pending_row;
	} else {
		gsize skip = (gsize)off;

		of->row = 0;
		attr->skip_rows(fs->pw, &of->row, &skip);
		if (skip) {
			/* The row the offset falls in, from the offset on. */
			attr->show_rows(fs->pw, &of->row, out, 1);
			g_string_erase(out, 0, MIN(skip, out->len));
		}
	}
	left = pending ? 0 : out->len;
	if (left < size) {
		gsize want = size - left, first;

		if (out->len == left)
			attr->show_rows(fs->pw, &of->row, out, left + 1);
		first = out->len - left;
		while (first >= of->seq_size)
			of->seq_size *= 2;
		if (first && first < want)
			attr->show_rows(fs->pw, &of->row, out,
					left + MIN(want, of->seq_size));
		fresh = out->len - left;
		if (fresh >= of->seq_size) {
			/* The last row did not fit: it starts the next
			 * buffer.  Rows end in '\n' (names have no white
			 * space), and it is not the first. */
			const char *end = out->str + out->len - 1;

			trim_at = (gsize)((const char *)memrchr(
						  out->str + left, '\n',
						  (gsize)(end - out->str) -
							  left) -
					  out->str) +
				  1;
		}
	}
	n = MIN(size, trim_at ? trim_at : out->len);
	g_string_truncate(of->snap.text, 0);
	if (out->len > n)
		g_string_append_len(of->snap.text, out->str + n, out->len - n);
	of->pending_row = trim_at != 0;
	of->snap.valid = TRUE;
	of->snap.end = off + n;
	fuse_reply_buf(req, out->str, n);
	/* Keep the scratch buffer from holding on to a huge row. */
	if (out->allocated_len > 256 * 1024) {
		g_string_free(out, TRUE);
		fs->scratch = g_string_sized_new(4096);
	}
}

/* A parked read stops waiting for no wakeup event in progress. */
static void read_unpark(struct pf_fs *fs, struct parked *p)
{
	if (p->waiter)
		wakeup_cancel_wait(p->waiter);
	p->waiter = NULL;
	g_queue_unlink(&fs->parked, &p->link);
}

static void parked_read_wake(gpointer data)
{
	struct parked *p = data;
	struct pf_fs *fs = p->fs;

	p->waiter = NULL; /* it is done: nothing to cancel */
	read_unpark(fs, p);
	read_fresh(fs, p->req, p->of, p->size, p->off);
	g_free(p);
}

static gboolean answer_interrupted(gpointer data)
{
	struct pf_fs *fs = data;
	GList *l;

	fs->interrupt_idle = 0;
	while ((l = g_queue_pop_head_link(&fs->interrupted))) {
		struct parked *p = l->data;

		if (p->early) {
			/* The core goes on; its late answer is dropped. */
			p->early = FALSE;
			before_reply(fs);
			reply_store(p->req, (gssize)p->len);
			p->req = NULL;
			g_queue_push_tail_link(&fs->answered, &p->link);
			continue;
		}
		fuse_reply_err(p->req, EINTR);
		g_free(p);
	}
	return G_SOURCE_REMOVE;
}

/* libfuse calls this with the request locked: answering here would free the
 * request under its own lock.  Stop waiting now, answer from the loop. */
static void parked_read_interrupted(fuse_req_t req, void *data)
{
	struct parked *p = data;
	struct pf_fs *fs = p->fs;

	(void)req;
	if (!p->waiter)
		return;
	read_unpark(fs, p);
	g_queue_push_tail_link(&fs->interrupted, &p->link);
	if (!fs->interrupt_idle)
		fs->interrupt_idle = g_idle_add(answer_interrupted, fs);
	if (fs->debug)
		g_debug("%s: blocked read interrupted", node_name(p->of->node));
}

static void park_read(struct pf_fs *fs, fuse_req_t req, struct open_file *of,
		      size_t size, off_t off)
{
	struct parked *p = g_new0(struct parked, 1);

	p->fs = fs;
	p->req = req;
	p->link.data = p;
	p->of = of;
	p->size = size;
	p->off = off;
	g_queue_push_tail_link(&fs->parked, &p->link);
	p->waiter = wakeup_wait_idle(fs->pw->engine, parked_read_wake, p);
	/* May call parked_read_interrupted() at once if a signal came first. */
	fuse_req_interrupt_func(req, parked_read_interrupted, p);
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct pf_fs *fs = req_fs(req);
	struct open_file *of =
		(struct open_file *)pf_session_open_file(fs->session, fi, ino);

	/* The kernel names the lock owner of every read(2)-style read; the
	 * page cache's reads (sendfile, splice, mmap) have none.  They are
	 * refused (see the top of this file). */
	if (!of->node) {
		fuse_reply_err(req, ESTALE);
	} else if (fi->lock_owner == 0) {
		node_accessed(of->node);
		if (fs->debug) {
			g_autofree char *path = node_path(fs, of->node);

			g_debug("read %s %zu@%jd by pid %d through the page "
				"cache: EINVAL",
				path, size, (intmax_t)off,
				(int)fuse_req_ctx(req)->pid);
		}
		fuse_reply_err(req, EINVAL);
	} else if (of->node->attr->show_rows) {
		read_rows(fs, req, of, size, off);
	} else if (pf_snapshot_continues(&of->snap, off)) {
		pf_snapshot_reply(req, &of->snap, size, off);
	} else {
		read_fresh(fs, req, of, size, off);
	}
}

static void reply_store(fuse_req_t req, gssize result)
{
	if (result < 0)
		fuse_reply_err(req, (int)-result);
	else
		fuse_reply_write(req, (size_t)result);
}

static void store_done(gssize result, gpointer data)
{
	struct parked *p = data;

	before_reply(p->fs);
	if (p->early) {
		/* Answered before the loop got to the interrupt's answer. */
		g_queue_unlink(&p->fs->interrupted, &p->link);
		reply_store(p->req, result);
	} else if (p->req) {
		g_queue_unlink(&p->fs->parked, &p->link);
		reply_store(p->req, result);
	} else {
		g_queue_unlink(&p->fs->answered, &p->link);
	}
	g_free(p);
}

/* A parked write is answered now, ahead of the core, which goes on with it
 * and whose late answer is then dropped. */
static void answer_write_early(struct pf_fs *fs, struct parked *p,
			       gssize result)
{
	g_queue_unlink(&fs->parked, &p->link);
	reply_store(p->req, result);
	p->req = NULL;
	g_queue_push_tail_link(&fs->answered, &p->link);
}

/* A parked write that only waits for its turn is taken back, failing with
 * err; FALSE if it cannot be. */
static gboolean cancel_write(struct pf_fs *fs, struct parked *p, int err)
{
	if (!pf_attrs_store_cancel(fs->pw, p))
		return FALSE;
	g_queue_unlink(&fs->parked, &p->link);
	fuse_reply_err(p->req, err);
	g_free(p);
	return TRUE;
}

/* Answer parked requests now, as the freezer's fake signal ends every wait
 * in the kernel: blocked reads and writes waiting for their turn fail with
 * EINTR (the caller retries).  Writes under way stay, or, with
 * write_result, are answered with it at once (the core's late answer is
 * then dropped). */
static void answer_parked(struct pf_fs *fs, gboolean answer_writes,
			  gssize write_result)
{
	GList *l = fs->parked.head;

	while (l) {
		struct parked *p = l->data;
		GList *next = l->next;

		if (p->waiter) {
			read_unpark(fs, p);
			fuse_reply_err(p->req, EINTR);
			g_free(p);
		} else if (!cancel_write(fs, p, EINTR) && answer_writes) {
			answer_write_early(fs, p,
					   write_result < 0 ? write_result :
							      (gssize)p->len);
		}
		l = next;
	}
}

/* PF_EVENT_SLEEPING and PF_EVENT_RESUMED. */
static void fs_sleep_event(struct pf_event *ev, gpointer data)
{
	struct pf_fs *fs = data;
	gboolean waited = !g_queue_is_empty(&fs->parked);

	if (ev->type == PF_EVENT_RESUMED) {
		fs->host_asleep = FALSE;
		return;
	}
	if (waited)
		g_message("system going to sleep: answering waiting requests");
	/* The host freezes its tasks: a write the kernel would carry out
	 * after resume (an autosleep switch waiting for its turn) is
	 * answered now, and carried out then. */
	answer_parked(fs, ev->host, 0);
	fs->host_asleep = ev->host;
	if (waited)
		ev->answered = TRUE;
}

/* A writer interrupted while its write waits: if it only waited for its
 * turn (the kernel's interruptible transition lock), it gets EINTR.  A
 * write that is being carried out (a suspend) goes on, and its writer
 * waits for the answer, unless the sleep it asked for freezes the writer
 * itself (a container's own sleep, --backend=freeze): the interruption is
 * then the freezer's signal, and the kernel's FUSE client, which waits
 * for our answer, could not be frozen meanwhile.  So the write is answered
 * now, with success: the writer leaves the request and is frozen on its
 * way back to user space, before it runs any code of its own, and sees
 * its write return when the sleep is over, as on the kernel.  Called by
 * libfuse with the request locked: answer from the loop. */
static void parked_write_interrupted(fuse_req_t req, void *data)
{
	struct parked *p = data;
	struct pf_fs *fs = p->fs;
	pid_t pid = fuse_req_ctx(req)->pid;

	if (!p->req)
		return;
	if (!pf_attrs_store_cancel(fs->pw, p)) {
		if (!pf_attrs_store_interrupted(fs->pw, p, pid))
			return;
		g_info("write interrupted by the freezer of its sleep: "
		       "answered now (pid %d)",
		       (int)pid);
		p->early = TRUE;
	}
	g_queue_unlink(&fs->parked, &p->link);
	g_queue_push_tail_link(&fs->interrupted, &p->link);
	if (!fs->interrupt_idle)
		fs->interrupt_idle = g_idle_add(answer_interrupted, fs);
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct pf_fs *fs = req_fs(req);
	struct node *n = node_get(fs, ino);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct pf_caller caller = { ctx->pid, ctx->uid, ctx->gid };
	char text[PF_STORE_MAX + 1];
	struct parked *p;
	gsize len;
	gssize ret;

	(void)off;
	(void)fi;
	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	/* (The kernel answers an empty write itself, with 0: debugfs would
	 * fail it with EINVAL.) */
	if (size == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	/* One write is one command of at most a page, NUL-terminated like
	 * the buffer sysfs hands to a store. */
	len = MIN(size, PF_STORE_MAX);
	memcpy(text, buf, len);
	text[len] = '\0';

	if (n->attr->not_twice && pf_session_replaying(fs->session)) {
		g_warning("a write of %s that the previous server had taken "
			  "and not answered is refused with EBUSY, not done "
			  "again (pid %d)",
			  node_name(n), caller.pid);
		reply_store(req, -EBUSY);
		return;
	}
	/* Most stores answer at once: reuse one spare record until a store
	 * keeps it (PF_PENDING). */
	p = fs->spare ? fs->spare : g_new0(struct parked, 1);
	fs->spare = NULL;
	*p = (struct parked){ .fs = fs, .req = req, .len = len };
	p->link.data = p;
	ret = n->attr->store(fs->pw, &caller, text, len, store_done, p);
	if (fs->debug) {
		g_autofree char *shown = g_strescape(text, NULL);

		g_debug("write %s \"%s\" by pid %d uid %u: %s", node_name(n),
			shown, caller.pid, caller.uid,
			ret == PF_PENDING ? "pending" :
			ret < 0		  ? g_strerror((int)-ret) :
					    "ok");
	}
	if (ret == PF_PENDING) {
		g_queue_push_tail_link(&fs->parked, &p->link);
		/* One that comes during the host's sleep must not wait
		 * (see read_fresh()), and EINTR would have a writer that
		 * retries (bash's echo, Python) loop until the freezer
		 * fails: EBUSY, the kernel's answer for a transition it
		 * cannot start now. */
		if (fs->host_asleep && !cancel_write(fs, p, EBUSY))
			answer_write_early(fs, p, (gssize)len);
		else if (!fs->host_asleep)
			fuse_req_interrupt_func(req, parked_write_interrupted,
						p);
		return;
	}
	fs->spare = p;
	before_reply(fs);
	reply_store(req, ret);
}

/* SEEK_DATA and SEEK_HOLE (SEEK_SET, SEEK_CUR and SEEK_END never reach a
 * FUSE server): a sysfs attribute is one page of data, a debugfs seq_file
 * has neither. */
static void fs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	const struct node *n = node_get(req_fs(req), ino);

	(void)fi;
	if (!n)
		fuse_reply_err(req, ESTALE);
	else if (n->attr->debugfs)
		fuse_reply_err(req, EINVAL);
	else if (off >= n->attr->size)
		fuse_reply_err(req, ENXIO);
	else
		fuse_reply_lseek(req,
				 whence == SEEK_DATA ? off : n->attr->size);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct pf_fs *fs = req_fs(req);
	const struct node *dir = node_get(fs, ino);
	g_autofree char *buf = g_malloc(size);
	size_t used = 0;
	off_t pos = 0;

	(void)fi;
	if (!dir) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (!S_ISDIR(dir->owner->mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	/* Entry k of the listing has offset k + 1: ".", "..", then children. */
	for (guint i = 0; i < fs->n_nodes + 1; i++) {
		struct stat st = { 0 };
		const struct node *n;
		const char *name;
		size_t need;

		if (i == 0) {
			name = ".";
			n = dir;
		} else if (i == 1) {
			name = "..";
			n = dir->parent ? dir->parent : dir;
		} else if (fs->nodes[i - 1].parent == dir &&
			   !fs->nodes[i - 1].absent) {
			n = &fs->nodes[i - 1];
			name = n->attr->name;
		} else {
			continue;
		}
		if (pos++ < off)
			continue;
		st.st_ino = n->ino;
		st.st_mode = S_ISDIR(n->owner->mode) ? S_IFDIR : S_IFREG;
		need = fuse_add_direntry(req, buf + used, size - used, name,
					 &st, pos);
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* O_TRUNC comes as a truncation after the open, whose answer gives
	 * the kernel the size back: with it in the open, the kernel would
	 * hold a size of 0, and sendfile would find nothing to read. */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	pf_session_init_conn(conn);
}

/* The set of files is fixed: pf_refuse_changes() fills in the
 * handlers that would create, remove or rename. */
static struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.lookup = fs_lookup,
	.getattr = fs_getattr,
	.setattr = fs_setattr,
	.open = fs_open,
	.release = fs_release,
	.read = fs_read,
	.write = fs_write,
	.lseek = fs_lseek,
	.readdir = fs_readdir,
};

/* FNV-1a, 64 bits: a path's hash, the same in every build. */
static guint64 path_hash(const char *path)
{
	guint64 h = G_GUINT64_CONSTANT(14695981039346656037);

	for (; *path; path++)
		h = (h ^ (guchar)*path) * G_GUINT64_CONSTANT(1099511628211);
	return h;
}

static void build_nodes(struct pf_fs *fs, const struct pf_attr *attrs,
			guint n_attrs)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	fs->n_nodes = n_attrs + 1;
	fs->nodes = g_new0(struct node, fs->n_nodes);
	fs->by_ino = g_hash_table_new(g_int64_hash, g_int64_equal);
	fs->root_owner = (struct pf_owner){ .mode = S_IFDIR | 0755 };
	fs->nodes[0] = (struct node){ .owner = &fs->root_owner,
				      .nlink = 2,
				      .ino = FUSE_ROOT_ID,
				      .atime = now,
				      .mtime = now,
				      .ctime = now };
	for (guint i = 0; i < n_attrs; i++)
		fs->nodes[i + 1] = (struct node){
			.attr = &attrs[i],
			.parent = &fs->nodes[attrs[i].parent + 1],
			.nlink = S_ISDIR(attrs[i].mode) ? 2 : 1,
			.atime = now,
			.mtime = now,
			.ctime = now,
			.absent = !pf_attr_present(&attrs[i], fs->pw),
		};
	for (guint i = 1; i < fs->n_nodes; i++) {
		struct node *n = &fs->nodes[i];
		g_autofree char *path = node_path(fs, n);

		n->owner = pf_owners_add(fs->owners, path, n->attr->mode,
					 !n->absent);
		if (n->absent)
			continue; /* its number names nothing: ESTALE */
		n->ino = INO_NAMED | (path_hash(path) & INO_HASH_MASK);
		/* Names are few: a collision is a bug to see at once. */
		g_assert(!g_hash_table_contains(fs->by_ino, &n->ino));
		g_hash_table_insert(fs->by_ino, &n->ino, n);
		for (guint k = 0; k < G_N_ELEMENTS(legacy_paths); k++)
			if (!strcmp(path, legacy_paths[k]))
				fs->legacy[k] = n;
		/* A directory's ".." is a link to its parent. */
		if (S_ISDIR(n->owner->mode))
			n->parent->nlink++;
	}
}

/* A file an earlier powerfs opened, met again after a restart. */
static struct pf_snapshot *adopt(void *userdata, fuse_ino_t ino)
{
	struct open_file *of = g_new0(struct open_file, 1);

	of->node = node_get(userdata, ino);
	return &of->snap;
}

struct pf_fs *pf_fs_serve(struct power *pw, const struct pf_attr *attrs,
			  guint n_attrs, struct pf_owners *owners, int fuse_fd,
			  int session_fd, const char *mountpoint,
			  gboolean debug, GSourceFunc on_unmounted,
			  gpointer data, GError **error)
{
	struct pf_fs *fs = g_new0(struct pf_fs, 1);

	fs->pw = pw;
	fs->debug = debug;
	if (!owners)
		owners = fs->own_owners = pf_owners_new();
	fs->owners = owners;
	g_queue_init(&fs->parked);
	g_queue_init(&fs->answered);
	g_queue_init(&fs->interrupted);
	fs->scratch = g_string_sized_new(4096);
	build_nodes(fs, attrs, n_attrs);
	pf_refuse_changes(&fs_ops);
	fs->session =
		pf_session_serve(&fs_ops, fs, fuse_fd, session_fd, mountpoint,
				 adopt, on_unmounted, data, error);
	if (!fs->session) {
		g_string_free(fs->scratch, TRUE);
		g_hash_table_unref(fs->by_ino);
		g_free(fs->nodes);
		pf_owners_free(fs->own_owners);
		g_free(fs);
		return NULL;
	}
	pf_events_subscribe(pw->events,
			    PF_EVENT_BIT(PF_EVENT_SLEEPING) |
				    PF_EVENT_BIT(PF_EVENT_RESUMED),
			    fs_sleep_event, fs);
	g_message("serving %s (backend %s)", mountpoint,
		  pw->backend->ops->name);
	return fs;
}

static char *node_path(struct pf_fs *fs, const struct node *n)
{
	(void)fs;
	if (!n->parent->attr)
		return g_strdup(n->attr->name);
	return g_strconcat(n->parent->attr->name, "/", n->attr->name, NULL);
}

void pf_fs_stop(struct pf_fs *fs)
{
	pf_session_stop(fs->session);
}

void pf_fs_free(struct pf_fs *fs, gboolean hand_over)
{
	GList *l;

	if (!fs)
		return;
	pf_events_unsubscribe(fs->pw->events, fs_sleep_event, fs);
	/* Nobody may stay inside a request of a server that is leaving,
	 * unless a successor takes them over: the kernel sends them again.
	 * The core is torn down next and will not answer. */
	if (!hand_over) {
		answer_parked(fs, TRUE, -EIO);
		if (fs->interrupt_idle)
			g_source_remove(fs->interrupt_idle);
		answer_interrupted(fs);
	}
	while ((l = g_queue_pop_head_link(&fs->parked)))
		g_free(l->data);
	while ((l = g_queue_pop_head_link(&fs->interrupted)))
		g_free(l->data);
	while ((l = g_queue_pop_head_link(&fs->answered)))
		g_free(l->data);
	if (fs->interrupt_idle)
		g_source_remove(fs->interrupt_idle);
	pf_session_free(fs->session);
	g_free(fs->spare);
	g_string_free(fs->scratch, TRUE);
	g_hash_table_unref(fs->by_ino);
	g_free(fs->nodes);
	pf_owners_free(fs->own_owners);
	g_free(fs);
}
