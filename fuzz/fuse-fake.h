/* fuse-fake.h - the kernel's side of a FUSE session, for the fuzzers that
 * drive fs.c and class-wakeup.c by their request handlers.
 *
 * A harness includes this, then the server's .c file, and calls the
 * handlers of its fuse_lowlevel_ops as libfuse would.  Here are the libfuse
 * calls those handlers make, and open-files.c's registry (the
 * same rules: a handle per open, a record the release frees, a handle never
 * seen adopted as after a restart), without /dev/fuse or a thread.
 *
 * Every request is checked to be answered exactly once: a second answer,
 * or a request still unanswered when the harness says all must be, aborts.
 * Replies are kept (errno or bytes) so the harness can check what a
 * request got.
 */
#ifndef POWERFS_FUZZ_FUSE_FAKE_H
#define POWERFS_FUZZ_FUSE_FAKE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "powerfs/transport/open-files.h"
#include "powerfs/transport/refuse.h"
#include "powerfs/transport/session.h"

struct fuse_req {
	void *userdata;
	struct fuse_ctx ctx;
	gboolean answered;
	gboolean interrupted;
	fuse_interrupt_func_t intr;
	void *intr_data;
	guint64 fh;	  /* reads and writes: the handle, else 0 */
	int error;	  /* the answer: errno, 0 for data */
	GByteArray *data; /* the answer's bytes */
};

struct pf_session {
	GHashTable *open_files; /* &snap->fh -> struct pf_snapshot */
	guint64 next_fh;
	pf_session_adopt_func adopt;
	void *userdata;
};

/* Requests not answered yet; fake_req_done() frees answered ones. */
static GPtrArray *fake_pending;

static void fake_check(gboolean ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuse-fake: %s\n", what);
		abort();
	}
}

static fuse_req_t fake_req_new(void *userdata, uid_t uid)
{
	fuse_req_t req = g_new0(struct fuse_req, 1);

	req->userdata = userdata;
	req->ctx = (struct fuse_ctx){ .uid = uid, .gid = uid, .pid = 1 };
	req->data = g_byte_array_new();
	g_ptr_array_add(fake_pending, req);
	return req;
}

static void fake_req_free(gpointer p)
{
	fuse_req_t req = p;

	g_byte_array_unref(req->data);
	g_free(req);
}

static GLogWriterOutput fake_log_writer(GLogLevelFlags level,
					const GLogField *fields, gsize n_fields,
					gpointer data)
{
	(void)level, (void)fields, (void)n_fields, (void)data;
	return G_LOG_WRITER_HANDLED;
}

static void fake_init(void)
{
	static gboolean quiet;

	/* Messages are structured (G_LOG_USE_STRUCTURED): silence them
	 * unless asked, once (GLib takes one writer per process). */
	if (!quiet && !getenv("FUZZ_VERBOSE"))
		g_log_set_writer_func(fake_log_writer, NULL, NULL);
	quiet = TRUE;
	fake_pending = g_ptr_array_new_with_free_func(fake_req_free);
}

/* Frees the answered requests; with all, every request must be answered. */
static void fake_sweep(gboolean all)
{
	for (guint i = fake_pending->len; i-- > 0;) {
		fuse_req_t req = fake_pending->pdata[i];

		fake_check(req->answered || !all, "a request never answered");
		if (req->answered)
			g_ptr_array_remove_index_fast(fake_pending, i);
	}
}

static void fake_finish(void)
{
	fake_sweep(TRUE);
	g_ptr_array_unref(fake_pending);
	fake_pending = NULL;
}

/* The kernel sends no RELEASE while a read or write of the handle waits:
 * the reader's or writer's file reference keeps the file open. */
static gboolean fake_fh_busy(guint64 fh)
{
	for (guint i = 0; i < fake_pending->len; i++) {
		fuse_req_t req = fake_pending->pdata[i];

		if (!req->answered && req->fh == fh)
			return TRUE;
	}
	return FALSE;
}

/* The kernel's INTERRUPT for a request still waiting. */
static void fake_interrupt(fuse_req_t req)
{
	if (req->answered || req->interrupted)
		return;
	req->interrupted = TRUE;
	if (req->intr)
		req->intr(req, req->intr_data);
}

static int fake_answer(fuse_req_t req, int error, const void *buf, size_t n)
{
	fake_check(!req->answered, "a request answered twice");
	req->answered = TRUE;
	req->error = error;
	if (n)
		g_byte_array_append(req->data, buf, (guint)n);
	return 0;
}

/* --- libfuse ------------------------------------------------------------- */

void *fuse_req_userdata(fuse_req_t req)
{
	return req->userdata;
}

const struct fuse_ctx *fuse_req_ctx(fuse_req_t req)
{
	return &req->ctx;
}

void fuse_req_interrupt_func(fuse_req_t req, fuse_interrupt_func_t func,
			     void *data)
{
	req->intr = func;
	req->intr_data = data;
	/* libfuse calls it at once if the interrupt came first. */
	if (func && req->interrupted)
		func(req, data);
}

int fuse_reply_err(fuse_req_t req, int err)
{
	fake_check(err >= 0 && err < 4096, "an errno out of range");
	return fake_answer(req, err, NULL, 0);
}

int fuse_reply_buf(fuse_req_t req, const char *buf, size_t size)
{
	return fake_answer(req, 0, buf, size);
}

int fuse_reply_write(fuse_req_t req, size_t count)
{
	return fake_answer(req, 0, &count, sizeof(count));
}

int fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
	fake_check(e->ino != 0, "an entry with inode 0");
	return fake_answer(req, 0, e, sizeof(*e));
}

int fuse_reply_attr(fuse_req_t req, const struct stat *attr,
		    double attr_timeout)
{
	(void)attr_timeout;
	return fake_answer(req, 0, attr, sizeof(*attr));
}

int fuse_reply_lseek(fuse_req_t req, off_t off)
{
	return fake_answer(req, 0, &off, sizeof(off));
}

int fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	return fake_answer(req, 0, fi, sizeof(*fi));
}

/* As libfuse: the entry's size, written only if it fits. */
size_t fuse_add_direntry(fuse_req_t req, char *buf, size_t bufsize,
			 const char *name, const struct stat *stbuf, off_t off)
{
	size_t namelen = strlen(name);
	size_t need = (24 + namelen + 7) & ~(size_t)7;

	(void)req;
	(void)stbuf;
	(void)off;
	fake_check(namelen > 0 && namelen < 256, "a bad directory entry");
	if (need <= bufsize) {
		memset(buf, 0, need);
		memcpy(buf + 24, name, namelen);
	}
	return need;
}

/* --- open-files.c ------------------------------------------ */

void pf_session_init_conn(struct fuse_conn_info *conn)
{
	(void)conn;
}

void pf_refuse_changes(struct fuse_lowlevel_ops *ops)
{
	(void)ops;
}

static void fake_open_file_free(gpointer p)
{
	struct pf_snapshot *snap = p;

	g_string_free(snap->text, TRUE);
	g_free(snap);
}

static struct pf_session *fake_session_new(pf_session_adopt_func adopt,
					   void *userdata)
{
	struct pf_session *ps = g_new0(struct pf_session, 1);

	ps->open_files = g_hash_table_new_full(g_int64_hash, g_int64_equal,
					       NULL, fake_open_file_free);
	ps->next_fh = 1;
	ps->adopt = adopt;
	ps->userdata = userdata;
	return ps;
}

struct pf_session *pf_session_serve(const struct fuse_lowlevel_ops *ops,
				    void *userdata, int fuse_fd, int session_fd,
				    const char *name,
				    pf_session_adopt_func adopt,
				    GSourceFunc on_unmounted, gpointer data,
				    GError **error)
{
	(void)ops, (void)fuse_fd, (void)session_fd, (void)name;
	(void)on_unmounted, (void)data, (void)error;
	return fake_session_new(adopt, userdata);
}

gboolean pf_session_replaying(const struct pf_session *ps)
{
	(void)ps;
	return FALSE;
}

void pf_session_stop(struct pf_session *ps)
{
	(void)ps;
}

void pf_session_free(struct pf_session *ps)
{
	if (!ps)
		return;
	g_hash_table_unref(ps->open_files);
	g_free(ps);
}

void pf_session_reply_open(struct pf_session *ps, fuse_req_t req,
			   struct fuse_file_info *fi, struct pf_snapshot *snap,
			   gboolean keep_cache)
{
	guint64 fh = ps->next_fh++;

	(void)fi;
	(void)keep_cache;
	snap->text = g_string_sized_new(64);
	snap->fh = fh;
	g_hash_table_insert(ps->open_files, &snap->fh, snap);
	fake_answer(req, 0, &fh, sizeof(fh));
}

struct pf_snapshot *pf_session_open_file(struct pf_session *ps,
					 const struct fuse_file_info *fi,
					 fuse_ino_t ino)
{
	struct pf_snapshot *snap = g_hash_table_lookup(ps->open_files, &fi->fh);

	if (snap)
		return snap;
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

/* Input bytes, taken from the front. */
struct fake_input {
	const guint8 *p;
	size_t left;
};

static guint fake_byte(struct fake_input *in)
{
	if (!in->left)
		return 0;
	in->left--;
	return *in->p++;
}

static guint fake_u16(struct fake_input *in)
{
	return fake_byte(in) | fake_byte(in) << 8;
}

/* Up to max bytes, the length from the input. */
static size_t fake_bytes(struct fake_input *in, char *out, size_t max)
{
	size_t want = fake_u16(in); /* once: MIN() evaluates twice */
	size_t n = MIN(MIN(want, max), in->left);

	memcpy(out, in->p, n);
	in->p += n;
	in->left -= n;
	return n;
}

#endif
