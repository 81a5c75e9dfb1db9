/* class-wakeup.c - /sys/class/wakeup served from the wakeup engine
 * (the kernel's drivers/base/power/wakeup_stats.c).
 *
 * A second FUSE mount, driven from the same GLib main loop as the main one
 * (fs.c) but with its own session and operations.  Every wakeup source has a
 * directory wakeup<id>, id being the lowest number free when it was
 * registered, holding ten read-only statistics files.  In the kernel each
 * /sys/class/wakeup/wakeupN is a symlink to a device directory
 * (/sys/devices/virtual/wakeup/wakeupN) that also holds device, power,
 * subsystem and uevent; here it is a plain directory with just the
 * statistics, which is all that readers of the class look at.
 *
 * Sources come and go, so nothing is stored per source: an inode number
 * encodes the source id and the file, and every request looks the source up
 * in the engine again.  The kernel is told not to cache names or attributes
 * (timeouts of 0), so a vanished source is ENOENT at once.
 *
 * Reads follow the main mount's rules: direct_io, the content generated at
 * offset 0 (or at an offset the open file has no snapshot for), a read that
 * continues where the last one ended served from that snapshot, and no read
 * through the page cache.
 */
#include "powerfs/transport/open-files.h"
#include "powerfs/transport/refuse.h"
#include "powerfs/transport/session.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

#include "powerfs/sysfs/class-wakeup.h"

/* ino 1 is the root; source id N has its directory at DIR_INO(N) and its
 * files right after it. */
#define INO_PER_SOURCE 16
#define DIR_INO(id) ((fuse_ino_t)2 + (fuse_ino_t)(id)*INO_PER_SOURCE)

/* sysfs_emit() writes at most PAGE_SIZE - 1 characters. */
#define CONTENT_MAX 4095

enum field_kind { FIELD_NAME, FIELD_ULONG, FIELD_LLONG };

/* The files of a wakeupN directory, in the kernel's order; file k (from 1)
 * has inode DIR_INO(id) + k. */
static const struct field {
	const char *name;
	enum field_kind kind;
	size_t offset; /* in struct wakeup_stats */
} fields[] = {
	{ "name", FIELD_NAME, 0 },
#define ULONG_FIELD(f)                                            \
	{                                                         \
#f, FIELD_ULONG, offsetof(struct wakeup_stats, f) \
	}
#define LLONG_FIELD(f)                                            \
	{                                                         \
#f, FIELD_LLONG, offsetof(struct wakeup_stats, f) \
	}
	ULONG_FIELD(active_count),
	ULONG_FIELD(event_count),
	ULONG_FIELD(wakeup_count),
	ULONG_FIELD(expire_count),
	LLONG_FIELD(active_time_ms),
	LLONG_FIELD(total_time_ms),
	LLONG_FIELD(max_time_ms),
	LLONG_FIELD(last_change_ms),
	LLONG_FIELD(prevent_suspend_time_ms),
#undef ULONG_FIELD
#undef LLONG_FIELD
};
#define N_FIELDS G_N_ELEMENTS(fields)

G_STATIC_ASSERT(N_FIELDS < INO_PER_SOURCE);

struct pf_class_wakeup {
	struct wakeup_engine *engine;
	struct pf_session *session;
	struct timespec mounted_at;
};

/* What an inode number means. */
enum node_kind { NODE_NONE, NODE_ROOT, NODE_DIR, NODE_FILE };

struct node {
	enum node_kind kind;
	guint id;		  /* NODE_DIR, NODE_FILE */
	guint field;		  /* NODE_FILE: index into fields[] */
	struct wakeup_source *ws; /* NODE_DIR, NODE_FILE */
};

struct open_file {
	struct pf_snapshot snap; /* first: the session frees the record */
	guint id, field;
	guint64 serial; /* the source at open time; 0 = none */
};

static struct pf_class_wakeup *req_cw(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* Decodes ino; a source that no longer exists makes it NODE_NONE. */
static struct node node_get(struct pf_class_wakeup *cw, fuse_ino_t ino)
{
	struct node n = { NODE_NONE, 0, 0, NULL };
	fuse_ino_t rel, id;

	if (ino == FUSE_ROOT_ID) {
		n.kind = NODE_ROOT;
		return n;
	}
	if (ino < DIR_INO(0))
		return n;
	rel = (ino - DIR_INO(0)) % INO_PER_SOURCE;
	id = (ino - DIR_INO(0)) / INO_PER_SOURCE;
	if (rel > N_FIELDS || id > G_MAXUINT)
		return n;
	n.ws = wakeup_source_by_id(cw->engine, (guint)id);
	if (!n.ws)
		return n;
	n.id = (guint)id;
	if (rel == 0) {
		n.kind = NODE_DIR;
	} else {
		n.kind = NODE_FILE;
		n.field = (guint)rel - 1;
	}
	return n;
}

static void count_source(const struct wakeup_source *ws, gpointer data)
{
	(void)ws;
	(*(guint *)data)++;
}

static void node_stat(struct pf_class_wakeup *cw, fuse_ino_t ino,
		      const struct node *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_blksize = 4096;
	st->st_atim = st->st_mtim = st->st_ctim = cw->mounted_at;
	if (n->kind == NODE_FILE) {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = 4096; /* as every sysfs attribute */
	} else {
		guint subdirs = 0;

		if (n->kind == NODE_ROOT)
			wakeup_foreach_source(cw->engine, count_source,
					      &subdirs);
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2 + subdirs;
	}
}

static void reply_entry(fuse_req_t req, fuse_ino_t ino, const struct node *n)
{
	/* Timeouts of 0: the kernel asks again on every path walk, so a
	 * source that went away is ENOENT at once.  An inode number comes
	 * back when its id is reused; open files tell the two sources apart
	 * by their serials.  (As a FUSE generation, the serial would make
	 * the kernel turn the old inode bad: close(2) of a file opened
	 * before would fail with EIO.) */
	struct fuse_entry_param e = { .ino = ino };

	node_stat(req_cw(req), ino, n, &e.attr);
	fuse_reply_entry(req, &e);
}

/* "wakeup<id>" with id in canonical decimal (no sign, no leading zero). */
static gboolean parse_dir_name(const char *name, guint *id)
{
	guint64 v;

	if (!g_str_has_prefix(name, "wakeup"))
		return FALSE;
	name += strlen("wakeup");
	if (!g_ascii_isdigit(name[0]) || (name[0] == '0' && name[1]))
		return FALSE;
	for (const char *p = name; *p; p++)
		if (!g_ascii_isdigit(*p))
			return FALSE;
	if (!g_ascii_string_to_unsigned(name, 10, 0, G_MAXUINT, &v, NULL))
		return FALSE;
	*id = (guint)v;
	return TRUE;
}

static void cw_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct pf_class_wakeup *cw = req_cw(req);
	struct node dir = node_get(cw, parent);
	fuse_ino_t ino;
	guint id;

	switch (dir.kind) {
	case NODE_ROOT:
		if (parse_dir_name(name, &id)) {
			ino = DIR_INO(id);
			dir = node_get(cw, ino);
			if (dir.kind == NODE_DIR) {
				reply_entry(req, ino, &dir);
				return;
			}
		}
		break;
	case NODE_DIR:
		for (guint i = 0; i < N_FIELDS; i++)
			if (!strcmp(fields[i].name, name)) {
				struct node file = { NODE_FILE, dir.id, i,
						     dir.ws };

				reply_entry(req, DIR_INO(dir.id) + 1 + i,
					    &file);
				return;
			}
		break;
	case NODE_FILE:
		fuse_reply_err(req, ENOTDIR);
		return;
	case NODE_NONE:
		break;
	}
	fuse_reply_err(req, ENOENT);
}

static void cw_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct pf_class_wakeup *cw = req_cw(req);
	struct node n = node_get(cw, ino);
	struct stat st;

	(void)fi;
	if (n.kind == NODE_NONE) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	node_stat(cw, ino, &n, &st);
	fuse_reply_attr(req, &st, 0);
}

/* Nothing here can be changed; only times may be "set" (and are ignored,
 * as on the main mount). */
static void cw_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct pf_class_wakeup *cw = req_cw(req);
	struct node n = node_get(cw, ino);
	struct stat st;

	(void)attr;
	(void)fi;
	if (n.kind == NODE_NONE) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
		      FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	node_stat(cw, ino, &n, &st);
	fuse_reply_attr(req, &st, 0);
}

static void cw_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pf_class_wakeup *cw = req_cw(req);
	struct node n = node_get(cw, ino);
	struct open_file *of;

	if (n.kind == NODE_NONE) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n.kind != NODE_FILE) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	/* Read-only files: not even root may open them for writing. */
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EACCES);
		return;
	}
	/* As on the main mount: sysfs has no direct I/O. */
	if (fi->flags & O_DIRECT) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	of = g_new0(struct open_file, 1);
	of->id = n.id;
	of->field = n.field;
	of->serial = wakeup_source_serial(n.ws);
	pf_session_reply_open(cw->session, req, fi, &of->snap, FALSE);
}

static void cw_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)ino;
	pf_session_release(req_cw(req)->session, req, fi);
}

static void show_field(const struct wakeup_source *ws, guint field,
		       GString *out)
{
	const struct field *f = &fields[field];
	struct wakeup_stats st;

	if (f->kind == FIELD_NAME) {
		g_string_append_printf(out, "%s\n", wakeup_source_name(ws));
	} else {
		wakeup_source_get_stats(ws, &st);
		if (f->kind == FIELD_ULONG)
			g_string_append_printf(
				out, "%lu\n",
				*(const gulong *)((const char *)&st +
						  f->offset));
		else
			g_string_append_printf(
				out, "%lld\n",
				(long long)*(const gint64 *)((const char *)&st +
							     f->offset));
	}
	if (out->len > CONTENT_MAX)
		g_string_truncate(out, CONTENT_MAX);
}

static void cw_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct pf_class_wakeup *cw = req_cw(req);
	struct open_file *of =
		(struct open_file *)pf_session_open_file(cw->session, fi, ino);
	struct wakeup_source *ws;

	/* Reads through the page cache (sendfile and splice on Linux 6.5 and
	 * later: no lock owner) fail with EINVAL, as on the main mount: the
	 * inode's page cache is every opener's, and an answered read there
	 * comes out padded with zeros or cut when the kernel takes a lookup's
	 * attributes meanwhile (see fs.c). */
	if (fi->lock_owner == 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (pf_snapshot_continues(&of->snap, off)) {
		pf_snapshot_reply(req, &of->snap, size, off);
		return;
	}
	g_string_truncate(of->snap.text, 0);
	of->snap.valid = FALSE;
	/* The source is gone (its id perhaps reused by another one): like
	 * an open attribute of a removed sysfs device. */
	ws = wakeup_source_by_id(cw->engine, of->id);
	if (!ws || wakeup_source_serial(ws) != of->serial) {
		fuse_reply_err(req, ENODEV);
		return;
	}
	show_field(ws, of->field, of->snap.text);
	of->snap.valid = TRUE;
	pf_snapshot_reply(req, &of->snap, size, off);
}

static void cw_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct node n = node_get(req_cw(req), ino);

	if (n.kind == NODE_NONE)
		fuse_reply_err(req, ENOENT);
	else if (n.kind == NODE_FILE)
		fuse_reply_err(req, ENOTDIR);
	else
		fuse_reply_open(req, fi);
}

static void collect_id(const struct wakeup_source *ws, gpointer data)
{
	guint id = wakeup_source_id(ws);

	g_array_append_val((GArray *)data, id);
}

static gint compare_ids(gconstpointer a, gconstpointer b)
{
	guint x = *(const guint *)a, y = *(const guint *)b;

	return x < y ? -1 : x > y;
}

/* Adds one entry if its cookie is past off; FALSE once the buffer is full.
 * An entry's cookie is what the kernel hands back as off to continue after
 * it, so entries are listed in cookie order and sources that appear or
 * vanish between two calls do not shift the others. */
static gboolean add_entry(fuse_req_t req, char *buf, size_t size, size_t *used,
			  off_t off, const char *name, fuse_ino_t ino,
			  mode_t type, off_t cookie)
{
	struct stat st = { .st_ino = ino, .st_mode = type };
	size_t need;

	if (cookie <= off)
		return TRUE;
	need = fuse_add_direntry(req, buf + *used, size - *used, name, &st,
				 cookie);
	if (need > size - *used)
		return FALSE;
	*used += need;
	return TRUE;
}

static void cw_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct pf_class_wakeup *cw = req_cw(req);
	struct node dir = node_get(cw, ino);
	g_autofree char *buf = g_malloc(size);
	size_t used = 0;

	(void)fi;
	if (dir.kind == NODE_FILE) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	/* A directory whose source vanished while open lists only its dots,
	 * as a removed sysfs directory does. */
	if (!add_entry(req, buf, size, &used, off, ".", ino, S_IFDIR, 1) ||
	    !add_entry(req, buf, size, &used, off, "..", FUSE_ROOT_ID, S_IFDIR,
		       2))
		goto out;
	if (dir.kind == NODE_ROOT) {
		g_autoptr(GArray) ids =
			g_array_new(FALSE, FALSE, sizeof(guint));

		wakeup_foreach_source(cw->engine, collect_id, ids);
		g_array_sort(ids, compare_ids);
		for (guint i = 0; i < ids->len; i++) {
			guint id = g_array_index(ids, guint, i);
			char name[32];

			g_snprintf(name, sizeof(name), "wakeup%u", id);
			if (!add_entry(req, buf, size, &used, off, name,
				       DIR_INO(id), S_IFDIR, (off_t)id + 3))
				break;
		}
	} else if (dir.kind == NODE_DIR) {
		for (guint i = 0; i < N_FIELDS; i++)
			if (!add_entry(req, buf, size, &used, off,
				       fields[i].name, DIR_INO(dir.id) + 1 + i,
				       S_IFREG, (off_t)i + 3))
				break;
	}
out:
	fuse_reply_buf(req, buf, used);
}

static void cw_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	pf_session_init_conn(conn);
}

/* The tree is the engine's: nothing can be created, removed or renamed
 * (pf_refuse_changes() fills those in). */
static struct fuse_lowlevel_ops cw_ops = {
	.init = cw_init,
	.lookup = cw_lookup,
	.getattr = cw_getattr,
	.setattr = cw_setattr,
	.open = cw_open,
	.release = cw_release,
	.read = cw_read,
	.opendir = cw_opendir,
	.readdir = cw_readdir,
};

/* A file an earlier powerfs opened: its source then, if it is still
 * there, was the one with its id now (a restart keeps no serial). */
static struct pf_snapshot *adopt(void *userdata, fuse_ino_t ino)
{
	struct pf_class_wakeup *cw = userdata;
	struct node n = node_get(cw, ino);
	struct open_file *of = g_new0(struct open_file, 1);

	if (n.kind == NODE_FILE) {
		of->id = n.id;
		of->field = n.field;
		of->serial = wakeup_source_serial(n.ws);
	}
	return &of->snap;
}

struct pf_class_wakeup *pf_class_wakeup_serve(struct wakeup_engine *engine,
					      int fuse_fd, int session_fd,
					      const char *mountpoint,
					      GError **error)
{
	struct pf_class_wakeup *cw = g_new0(struct pf_class_wakeup, 1);

	cw->engine = engine;
	clock_gettime(CLOCK_REALTIME, &cw->mounted_at);
	pf_refuse_changes(&cw_ops);
	/* Its end leaves the main loop running: the main mount goes on. */
	cw->session = pf_session_serve(&cw_ops, cw, fuse_fd, session_fd,
				       mountpoint, adopt, NULL, NULL, error);
	if (!cw->session) {
		g_prefix_error(error, "--class-wakeup: ");
		g_free(cw);
		return NULL;
	}
	g_message("serving wakeup source statistics on %s", mountpoint);
	return cw;
}

void pf_class_wakeup_stop(struct pf_class_wakeup *cw)
{
	if (cw)
		pf_session_stop(cw->session);
}

void pf_class_wakeup_free(struct pf_class_wakeup *cw)
{
	if (!cw)
		return;
	pf_session_free(cw->session);
	g_free(cw);
}
