/* fs.c - the FUSE side of powerfs: inodes, open files, reads and writes.
 *
 * The low-level libfuse API (fuse-session.c): one request at a time is
 * handled under the loop lock, so the core needs no locks of its own.  A
 * request that must wait (a wakeup_count read while a wakeup source is
 * active, a state write while the system "sleeps") is parked: its fuse_req_t
 * is kept and answered later from the main loop, and everyone else goes on
 * being served.
 *
 * Files behave like sysfs files: a read at offset 0 (or at an offset the open
 * file has no snapshot for) generates the content, a read that continues where
 * the last one ended is served from that snapshot, and every write(2) is one
 * whole command whatever the file offset.  All files are opened direct_io, so
 * no read is ever served from the page cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "powerfs/attrs.h"
#include "powerfs/fs.h"
#include "powerfs/fuse-session.h"

/* The attribute table never changes while mounted: let the kernel cache
 * names and attributes (a write invalidates the size it caches itself). */
#define CACHE_SECONDS 3600.0

struct node {
	const struct pf_attr *attr;	/* NULL for the root */
	fuse_ino_t parent;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	struct timespec ctime;
};

struct open_file {
	struct pf_snapshot snap;	/* first: the session frees the record */
	const struct node *node;
};

struct pf_fs {
	struct power *pw;
	struct pf_session *session;
	gboolean debug;
	struct node *nodes;	/* nodes[ino - 1] */
	guint n_nodes;
	struct timespec mounted_at;
	GQueue parked;		/* struct parked: waiting for the core */
	GQueue answered;	/* struct parked: answered early, core pending */
	GQueue interrupted;	/* struct parked: to be answered EINTR */
	guint interrupt_idle;
	struct parked *spare;	/* for the next write */
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
};

static struct pf_fs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct node *node_get(struct pf_fs *fs, fuse_ino_t ino)
{
	return ino >= 1 && ino <= fs->n_nodes ? &fs->nodes[ino - 1] : NULL;
}

static const char *node_name(const struct node *n)
{
	return n->attr ? n->attr->name : "/";
}

static void node_stat(struct pf_fs *fs, fuse_ino_t ino, struct stat *st)
{
	const struct node *n = node_get(fs, ino);

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = n->mode;
	st->st_nlink = S_ISDIR(n->mode) ? 2 : 1;
	st->st_uid = n->uid;
	st->st_gid = n->gid;
	st->st_size = n->attr ? n->attr->size : 0;
	st->st_blksize = 4096;
	st->st_atim = fs->mounted_at;
	st->st_mtim = fs->mounted_at;
	st->st_ctim = n->ctime;
}

static void reply_entry(fuse_req_t req, fuse_ino_t ino)
{
	struct fuse_entry_param e = {
		.ino = ino,
		.attr_timeout = CACHE_SECONDS,
		.entry_timeout = CACHE_SECONDS,
	};

	node_stat(req_fs(req), ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct pf_fs *fs = req_fs(req);

	for (guint i = 1; i < fs->n_nodes; i++)
		if (fs->nodes[i].parent == parent &&
		    !strcmp(fs->nodes[i].attr->name, name)) {
			reply_entry(req, i + 1);
			return;
		}
	fuse_reply_err(req, ENOENT);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	node_stat(req_fs(req), ino, &st);
	fuse_reply_attr(req, &st, CACHE_SECONDS);
}

/* chown and chmod persist (Android's init relies on it); the kernel has
 * already checked that the caller may (default_permissions).  Truncation
 * and times are accepted and ignored, as sysfs does. */
static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct pf_fs *fs = req_fs(req);
	struct node *n = node_get(fs, ino);
	struct stat st;

	(void)fi;
	if (to_set & FUSE_SET_ATTR_MODE)
		n->mode = (n->mode & S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID)
		n->uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		n->gid = attr->st_gid;
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
		      FUSE_SET_ATTR_GID)) {
		clock_gettime(CLOCK_REALTIME, &n->ctime);
		g_info("%s: mode %04o owner %u:%u", node_name(n),
		       n->mode & 07777, n->uid, n->gid);
		wakeup_notify_changed(fs->pw->engine);
	}
	node_stat(fs, ino, &st);
	fuse_reply_attr(req, &st, CACHE_SECONDS);
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pf_fs *fs = req_fs(req);
	const struct node *n = node_get(fs, ino);
	struct open_file *of;

	if (S_ISDIR(n->mode)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	/* Even root may not open a file without a store for writing. */
	if ((fi->flags & O_ACCMODE) != O_RDONLY && !n->attr->store) {
		fuse_reply_err(req, EACCES);
		return;
	}
	of = g_new0(struct open_file, 1);
	of->node = n;
	pf_session_reply_open(fs->session, req, fi, &of->snap);
}

static void fs_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)ino;
	pf_session_release(req_fs(req)->session, req, fi);
}

static void park_read(struct pf_fs *fs, fuse_req_t req, struct open_file *of,
		      size_t size, off_t off);

/* Generate the content and answer from it, or park until it can be. */
static void read_fresh(struct pf_fs *fs, fuse_req_t req, struct open_file *of,
		       size_t size, off_t off)
{
	int ret;

	g_string_truncate(of->snap.text, 0);
	of->snap.valid = FALSE;
	ret = of->node->attr->show(fs->pw, of->snap.text);
	if (ret == -EAGAIN) {
		park_read(fs, req, of, size, off);
		return;
	}
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	of->snap.valid = TRUE;
	pf_snapshot_reply(req, &of->snap, size, off);
}

static void parked_read_wake(gpointer data)
{
	struct parked *p = data;
	struct pf_fs *fs = p->fs;

	p->waiter = NULL;
	g_queue_unlink(&fs->parked, &p->link);
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
	wakeup_cancel_wait(p->waiter);
	p->waiter = NULL;
	g_queue_unlink(&fs->parked, &p->link);
	g_queue_push_tail_link(&fs->interrupted, &p->link);
	if (!fs->interrupt_idle)
		fs->interrupt_idle = g_idle_add(answer_interrupted, fs);
	if (fs->debug)
		g_debug("%s: blocked read interrupted",
			node_name(p->of->node));
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
	struct open_file *of = (struct open_file *)(uintptr_t)fi->fh;

	(void)ino;
	if (pf_snapshot_continues(&of->snap, off))
		pf_snapshot_reply(req, &of->snap, size, off);
	else
		read_fresh(req_fs(req), req, of, size, off);
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

	if (p->req) {
		g_queue_unlink(&p->fs->parked, &p->link);
		reply_store(p->req, result);
	} else {
		g_queue_unlink(&p->fs->answered, &p->link);
	}
	g_free(p);
}

/* Answer parked requests now.  Blocked reads fail with EINTR (the caller
 * retries, as after a signal).  With write_error, pending writes fail with
 * it and the core's late answers are dropped; without, they stay: their
 * result is not known yet. */
static void answer_parked(struct pf_fs *fs, int write_error)
{
	GList *l = fs->parked.head;

	while (l) {
		struct parked *p = l->data;
		GList *next = l->next;

		if (p->waiter) {
			g_queue_unlink(&fs->parked, l);
			wakeup_cancel_wait(p->waiter);
			fuse_reply_err(p->req, EINTR);
			g_free(p);
		} else if (write_error) {
			g_queue_unlink(&fs->parked, l);
			reply_store(p->req, -write_error);
			p->req = NULL;
			g_queue_push_tail_link(&fs->answered, &p->link);
		}
		l = next;
	}
}

void pf_fs_answer_parked(struct pf_fs *fs)
{
	guint n = g_queue_get_length(&fs->parked);

	if (n)
		g_message("system going to sleep: releasing waiting readers");
	answer_parked(fs, 0);
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct pf_fs *fs = req_fs(req);
	const struct node *n = node_get(fs, ino);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct pf_caller caller = { ctx->pid, ctx->uid, ctx->gid };
	char text[PF_STORE_MAX + 1];
	struct parked *p;
	gsize len;
	gssize ret;

	(void)off;
	(void)fi;
	if (size == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	/* One write is one command of at most a page, NUL-terminated like
	 * the buffer sysfs hands to a store. */
	len = MIN(size, PF_STORE_MAX);
	memcpy(text, buf, len);
	text[len] = '\0';

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
			ret < 0 ? g_strerror((int)-ret) : "ok");
	}
	if (ret == PF_PENDING) {
		g_queue_push_tail_link(&fs->parked, &p->link);
		return;
	}
	fs->spare = p;
	reply_store(req, ret);
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
	if (!S_ISDIR(dir->mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	/* Entry k of the listing has offset k + 1: ".", "..", then children. */
	for (guint i = 0; i < fs->n_nodes + 1; i++) {
		struct stat st = { 0 };
		const char *name;
		size_t need;

		if (i == 0) {
			name = ".";
			st.st_ino = ino;
		} else if (i == 1) {
			name = "..";
			st.st_ino = dir->parent ? dir->parent : ino;
		} else if (fs->nodes[i - 1].parent == ino) {
			name = fs->nodes[i - 1].attr->name;
			st.st_ino = i;
		} else {
			continue;
		}
		if (pos++ < off)
			continue;
		st.st_mode = S_ISDIR(node_get(fs, st.st_ino)->mode) ? S_IFDIR :
								      S_IFREG;
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
	/* O_TRUNC arrives with the open instead of as a separate truncate. */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

/* The set of files is fixed: pf_session_refuse_changes() fills in the
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
	.readdir = fs_readdir,
};

static void build_nodes(struct pf_fs *fs)
{
	guint n_attrs;
	const struct pf_attr *attrs = pf_attrs(&n_attrs);
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	fs->mounted_at = now;
	fs->n_nodes = n_attrs + 1;
	fs->nodes = g_new0(struct node, fs->n_nodes);
	fs->nodes[0] = (struct node){ NULL, 0, S_IFDIR | 0755, 0, 0, now };
	for (guint i = 0; i < n_attrs; i++)
		fs->nodes[i + 1] = (struct node){
			&attrs[i],
			attrs[i].parent < 0 ? FUSE_ROOT_ID :
					      (fuse_ino_t)attrs[i].parent + 2,
			attrs[i].mode, 0, 0, now
		};
}

struct pf_fs *pf_fs_mount(struct power *pw, const char *mountpoint,
			  const char *mount_options, gboolean debug,
			  GSourceFunc on_unmounted, gpointer data,
			  GError **error)
{
	struct pf_fs *fs = g_new0(struct pf_fs, 1);

	fs->pw = pw;
	fs->debug = debug;
	g_queue_init(&fs->parked);
	g_queue_init(&fs->answered);
	g_queue_init(&fs->interrupted);
	build_nodes(fs);
	pf_session_refuse_changes(&fs_ops);
	fs->session = pf_session_mount(&fs_ops, fs, mountpoint, mount_options,
				       on_unmounted, data, error);
	if (!fs->session) {
		g_free(fs->nodes);
		g_free(fs);
		return NULL;
	}
	g_message("serving %s (backend %s)", mountpoint,
		  pw->backend->ops->name);
	return fs;
}

static char *node_path(struct pf_fs *fs, const struct node *n)
{
	const struct node *parent = node_get(fs, n->parent);

	if (!parent || !parent->attr)
		return g_strdup(n->attr->name);
	return g_strconcat(parent->attr->name, "/", n->attr->name, NULL);
}

void pf_fs_foreach_owner(struct pf_fs *fs, pf_fs_owner_visit visit,
			 gpointer data)
{
	for (guint i = 0; i < fs->n_nodes; i++) {
		const struct node *n = &fs->nodes[i];
		g_autofree char *path = NULL;

		if (!n->attr)
			continue;
		path = node_path(fs, n);
		visit(path, n->mode & 07777, n->uid, n->gid, data);
	}
}

gboolean pf_fs_set_owner(struct pf_fs *fs, const char *path, mode_t mode,
			 uid_t uid, gid_t gid)
{
	for (guint i = 0; i < fs->n_nodes; i++) {
		struct node *n = &fs->nodes[i];
		g_autofree char *p = NULL;

		if (!n->attr)
			continue;
		p = node_path(fs, n);
		if (strcmp(p, path))
			continue;
		n->mode = (n->mode & S_IFMT) | (mode & 07777);
		n->uid = uid;
		n->gid = gid;
		return TRUE;
	}
	return FALSE;
}

void pf_fs_chown_writable(struct pf_fs *fs, uid_t uid, gid_t gid)
{
	for (guint i = 0; i < fs->n_nodes; i++) {
		struct node *n = &fs->nodes[i];

		if (n->attr && n->attr->store) {
			n->uid = uid;
			n->gid = gid;
		}
	}
	g_message("writable files owned by %u:%u", uid, gid);
}

void pf_fs_unmount(struct pf_fs *fs)
{
	GList *l;

	if (!fs)
		return;
	/* Nobody may stay inside a request of a server that is leaving.  The
	 * core is torn down next and will not answer. */
	answer_parked(fs, EIO);
	while ((l = g_queue_pop_head_link(&fs->answered)))
		g_free(l->data);
	if (fs->interrupt_idle)
		g_source_remove(fs->interrupt_idle);
	answer_interrupted(fs);
	pf_session_unmount(fs->session);
	g_free(fs->spare);
	g_free(fs->nodes);
	g_free(fs);
}
