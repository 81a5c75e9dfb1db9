/* inflight.c - the requests a server has read and not answered yet, kept
 * where its successor finds them.
 *
 * Once a server has read a request from /dev/fuse, the kernel waits for
 * that server's answer, and its caller waits with it, uninterruptibly, even
 * through SIGKILL.  If the server dies first, Linux 6.9 and later can send
 * such requests again to the next server (FUSE_NOTIFY_RESEND).  Before 6.9
 * nothing does: a blocked wakeup_count reader, a state writer or a lookup
 * would wait until the mount goes (a lost lookup also hangs every later
 * open of that name).  So each request is copied into the session file (the
 * keeper's memfd, which outlives servers) before it is processed, and the
 * copy is dropped once its answer is written.  A successor on such a kernel
 * processes the copies again, and its answers carry the requests' own ids,
 * which the kernel is still waiting for on this connection.
 *
 * A server can die between any two steps, and the order of the last two
 * decides what that costs.  Dropped after the answer, a copy can outlive
 * it: the successor processes that request again and the kernel refuses
 * the second answer (ENOENT: that request is done, and ids are never
 * reused).  Dropped before, the same window would leave a caller waiting
 * for ever, which is what this file is for.  So after, and a request may
 * be processed twice, as may one the dead server was processing: that is
 * harmless for reads, lookups and opens (a record of an open nobody
 * releases), a wake lock taken or released again (one more event counted),
 * autosleep, wakeup_count and the modes; a state write is refused then
 * (fs.c), not run twice.  And the kernel sends an INTERRUPT once: when one
 * is read, the request it names is marked in its slot, and a successor
 * answers that request EINTR instead of processing it again.
 *
 * And a server can die inside read(2): the kernel has handed it a request
 * and copied it out, and the process ends on its way back to user space,
 * before any code of ours could keep it.  That is why the readers read into
 * buffers in the same memfd: the kernel's copy lands in the shared pages
 * themselves.  The header records, per reader, the id of the last request
 * its code saw; a buffer holding another one holds a request that was read
 * and never seen, which a successor processes too (an INIT among them: the
 * connection's first server died before it could save it).
 *
 * The record, a shared mapping of the memfd from AREA_OFFSET on (the INIT
 * request lies before): a header, MAX_READERS read buffers, then N_SLOTS
 * slots of SLOT_BYTES.  A slot holds one request; its unique (the request's
 * id, never 0) is written last and cleared first, so a slot with unique 0
 * is free whatever else it holds.  Slots are taken lowest first and "used"
 * bounds the ones ever taken, so that a successor reads only those (reading
 * a hole of a memfd would allocate it; the pages of a read buffer past its
 * first few are never touched either).  Requests larger than a slot (writes
 * of more than about 4 KiB) and those beyond N_SLOTS waiting at once are
 * not kept.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fuse.h>

#include "powerfs/inflight.h"

#define AREA_OFFSET (64 * 1024)
#define HEADER_BYTES 4096
/* libfuse reads with a buffer of 256 pages and a header page, and the
 * kernel refuses a read into less than its largest write. */
#define READER_BYTES (1024 * 1024 + 8192)
#define SLOT_BYTES 4352		/* a one-page write and its headers fit */
#define N_SLOTS 1024
#define MAGIC "pfinfl03"
/* A request whose processing killed the server would kill each successor
 * in turn (and the keeper gives up after five crashes): processed again at
 * most this many times in a row without its processing returning (a
 * request that waits, a blocked reader, is processed again at every
 * hand-over), then refused with EIO. */
#define MAX_REPLAYS 2

struct area_header {
	char magic[8];
	guint32 slot_bytes;
	guint32 n_slots;
	guint32 used;		/* slots [0, used) have been taken */
	guint32 reader_bytes;
	guint64 seen[PF_INFLIGHT_READERS];	/* last request each saw */
};

struct slot {
	guint64 unique;		/* 0: free */
	guint32 len;
	guint16 replays;	/* times a successor processed it again */
	guint16 interrupted;	/* its caller was signalled (an INTERRUPT) */
	unsigned char data[SLOT_BYTES - 16];
};

/* Kept requests that their reader has not finished processing: a reader
 * keeps a request as soon as it has read it, before it waits for the loop
 * lock (a server killed meanwhile must not lose it), so there are at most
 * as many as readers.  Later, one not answered yet moves to waiting. */
#define FRESH_MAX 8

struct pf_inflight {
	GMutex lock;		/* readers keep requests outside the loop lock */
	char *name;
	void *map;
	struct area_header *header;
	char *readers;		/* PF_INFLIGHT_READERS buffers */
	struct slot *slots;
	guint32 free[N_SLOTS];	/* a stack, lowest index on top */
	guint n_free;
	struct {
		guint64 unique;
		guint32 slot;
	} fresh[FRESH_MAX];
	guint n_fresh;		/* written under lock, read without too */
	GHashTable *waiting;	/* unique -> slot index + 1 */
	GBytes *unseen_init;	/* an INIT a dead reader never returned */
	gboolean full_said;
};

G_STATIC_ASSERT(sizeof(struct slot) == SLOT_BYTES);
G_STATIC_ASSERT(sizeof(struct area_header) <= HEADER_BYTES);

#define MAP_BYTES (HEADER_BYTES + (gsize)PF_INFLIGHT_READERS * READER_BYTES + \
		   (gsize)N_SLOTS * SLOT_BYTES)

/* Requests the kernel expects no answer to, or that are kept elsewhere
 * (INIT, fuse-session.c). */
static gboolean answered_later(guint32 opcode)
{
	switch (opcode) {
	case FUSE_INIT:
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
	case FUSE_NOTIFY_REPLY:
	case FUSE_DESTROY:
		return FALSE;
	default:
		return TRUE;
	}
}

static gboolean slot_valid(const struct slot *s)
{
	const struct fuse_in_header *h = (const void *)s->data;

	return s->len >= sizeof(*h) && s->len <= sizeof(s->data) &&
	       h->len == s->len && h->unique == s->unique;
}

static gint by_unique(gconstpointer a, gconstpointer b)
{
	const struct fuse_in_header *x = g_bytes_get_data(*(GBytes **)a, NULL);
	const struct fuse_in_header *y = g_bytes_get_data(*(GBytes **)b, NULL);

	return x->unique < y->unique ? -1 : x->unique > y->unique;
}

static void release(struct pf_inflight *in, guint32 i)
{
	__atomic_store_n(&in->slots[i].unique, 0, __ATOMIC_RELEASE);
	in->free[in->n_free++] = i;
}

static void wait_for_answer(struct pf_inflight *in, guint64 unique,
			    guint32 i)
{
	g_hash_table_insert(in->waiting, g_memdup2(&unique, sizeof(unique)),
			    GUINT_TO_POINTER(i + 1));
}

/* A request a previous server left, in slot i: to be processed again
 * (left), or answered with an error (refused): EINTR if its caller was
 * signalled meanwhile (the kernel sent an INTERRUPT, which the dead server
 * read and never answered; it is not sent again), EIO if it was processed
 * again too often already. */
static void take_left(struct pf_inflight *in, guint32 i, GPtrArray *left,
		      GArray *refused)
{
	struct slot *s = &in->slots[i];
	struct pf_refusal r = { s->unique, 0 };

	if (s->interrupted)
		r.err = EINTR;
	else if (s->replays >= MAX_REPLAYS)
		r.err = EIO;
	if (r.err)
		g_array_append_val(refused, r);
	else
		g_ptr_array_add(left, g_bytes_new(s->data, s->len));
}

/* The slot of a waiting request, or NULL; with the lock held (or alone). */
static struct slot *waiting_slot(struct pf_inflight *in, guint64 unique)
{
	gpointer value;

	if (!g_hash_table_lookup_extended(in->waiting, &unique, NULL, &value))
		return NULL;
	return &in->slots[GPOINTER_TO_UINT(value) - 1];
}

/* An INTERRUPT read: the request it names, if kept, will be answered EINTR
 * by a successor.  With the lock held (or alone). */
static void note_interrupt(struct pf_inflight *in,
			   const struct fuse_in_header *h)
{
	const struct fuse_interrupt_in *arg = (const void *)(h + 1);
	struct slot *s;

	if (h->len < sizeof(*h) + sizeof(*arg))
		return;
	for (guint k = 0; k < in->n_fresh; k++)
		if (in->fresh[k].unique == arg->unique) {
			in->slots[in->fresh[k].slot].interrupted = 1;
			return;
		}
	if ((s = waiting_slot(in, arg->unique)))
		s->interrupted = 1;
}

/* A read buffer holding a request its reader's code never saw (the server
 * died inside read(2)): into a slot, as if kept at once. */
static void rescue_unseen(struct pf_inflight *in, guint r)
{
	const struct fuse_in_header *h =
		(const void *)(in->readers + (gsize)r * READER_BYTES);
	struct slot *s;
	guint32 i;

	if (!h->unique || h->unique == in->header->seen[r] ||
	    h->len < sizeof(*h) || h->len > sizeof(s->data))
		return;
	if (h->opcode == FUSE_INTERRUPT)
		note_interrupt(in, h);
	if (h->opcode == FUSE_INIT && !in->unseen_init)
		in->unseen_init = g_bytes_new(h, h->len);
	if (!answered_later(h->opcode) ||
	    g_hash_table_contains(in->waiting, &h->unique) || !in->n_free) {
		in->header->seen[r] = h->unique;
		return;
	}
	i = in->free[--in->n_free];
	s = &in->slots[i];
	memcpy(s->data, h, h->len);
	s->len = h->len;
	s->replays = 0;
	s->interrupted = 0;
	in->header->used = MAX(in->header->used, i + 1);
	__atomic_store_n(&s->unique, h->unique, __ATOMIC_RELEASE);
	in->header->seen[r] = h->unique;
	wait_for_answer(in, h->unique, i);
}

/* What a previous server left: the requests in slots, and those read into
 * a buffer and never seen. */
static void find_left(struct pf_inflight *in, GPtrArray *left,
		      GArray *refused)
{
	struct area_header *h = in->header;
	guint32 used = MIN(h->used, N_SLOTS);
	gboolean taken[N_SLOTS] = { FALSE };
	GHashTableIter iter;
	gpointer value;

	for (guint32 i = 0; i < used; i++) {
		struct slot *s = &in->slots[i];

		if (!s->unique)
			continue;
		if (!slot_valid(s)) {
			g_warning("%s: a damaged record of a request in slot "
				  "%u is dropped", in->name, i);
			s->unique = 0;
			continue;
		}
		taken[i] = TRUE;
		wait_for_answer(in, s->unique, i);
	}
	for (guint32 i = N_SLOTS; i-- > 0;)
		if (!taken[i])
			in->free[in->n_free++] = i;
	for (guint r = 0; r < PF_INFLIGHT_READERS; r++)
		rescue_unseen(in, r);
	g_hash_table_iter_init(&iter, in->waiting);
	while (g_hash_table_iter_next(&iter, NULL, &value))
		take_left(in, GPOINTER_TO_UINT(value) - 1, left, refused);
	g_ptr_array_sort(left, by_unique);
}

struct pf_inflight *pf_inflight_open(int session_fd, const char *name,
				     GPtrArray **left, GArray **refused)
{
	struct pf_inflight *in;
	struct stat st;
	void *map;

	*left = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
	*refused = g_array_new(FALSE, FALSE, sizeof(struct pf_refusal));
	if (session_fd < 0)
		return NULL;
	if (fstat(session_fd, &st) < 0 ||
	    (st.st_size < AREA_OFFSET + (off_t)MAP_BYTES &&
	     ftruncate(session_fd, AREA_OFFSET + (off_t)MAP_BYTES) < 0) ||
	    (map = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
			session_fd, AREA_OFFSET)) == MAP_FAILED) {
		g_warning("%s: cannot keep the requests in progress for a "
			  "successor (%s): after a crash on Linux before 6.9 "
			  "their callers would wait until the mount goes",
			  name, g_strerror(errno));
		return NULL;
	}
	in = g_new0(struct pf_inflight, 1);
	in->name = g_strdup(name);
	in->map = map;
	in->header = map;
	in->readers = (char *)map + HEADER_BYTES;
	in->slots = (struct slot *)(in->readers +
				    (gsize)PF_INFLIGHT_READERS * READER_BYTES);
	g_mutex_init(&in->lock);
	in->waiting = g_hash_table_new_full(g_int64_hash, g_int64_equal,
					    g_free, NULL);
	if (!memcmp(in->header->magic, MAGIC, sizeof(in->header->magic)) &&
	    in->header->slot_bytes == SLOT_BYTES &&
	    in->header->n_slots == N_SLOTS &&
	    in->header->reader_bytes == READER_BYTES) {
		find_left(in, *left, *refused);
	} else {
		if (in->header->magic[0])
			g_warning("%s: the record of requests in progress has "
				  "another layout (an older powerfs?): not "
				  "used", name);
		memset(in->header, 0, sizeof(*in->header));
		for (guint32 i = N_SLOTS; i-- > 0;)
			in->free[in->n_free++] = i;
		in->header->slot_bytes = SLOT_BYTES;
		in->header->n_slots = N_SLOTS;
		in->header->reader_bytes = READER_BYTES;
		memcpy(in->header->magic, MAGIC, sizeof(in->header->magic));
	}
	return in;
}

void pf_inflight_free(struct pf_inflight *in)
{
	if (!in)
		return;
	munmap(in->map, MAP_BYTES);
	g_hash_table_unref(in->waiting);
	if (in->unseen_init)
		g_bytes_unref(in->unseen_init);
	g_mutex_clear(&in->lock);
	g_free(in->name);
	g_free(in);
}

GBytes *pf_inflight_take_unseen_init(struct pf_inflight *in)
{
	return in ? g_steal_pointer(&in->unseen_init) : NULL;
}

void *pf_inflight_read_buffer(struct pf_inflight *in, guint reader,
			      gsize *size)
{
	if (!in || reader >= PF_INFLIGHT_READERS)
		return NULL;
	*size = READER_BYTES;
	return in->readers + (gsize)reader * READER_BYTES;
}

/* The read buffer buf is, or -1. */
static gint reader_of(const struct pf_inflight *in, const void *buf)
{
	gsize off = (gsize)((const char *)buf - in->readers);

	if ((const char *)buf < in->readers ||
	    off >= (gsize)PF_INFLIGHT_READERS * READER_BYTES ||
	    off % READER_BYTES)
		return -1;
	return (gint)(off / READER_BYTES);
}

static void keep(struct pf_inflight *in, const void *req, gsize len)
{
	const struct fuse_in_header *h = req;
	struct slot *s;
	guint32 i;

	if (len < sizeof(*h) || !answered_later(h->opcode) ||
	    len > sizeof(s->data) || !h->unique)
		return;
	if (!in->n_free) {
		if (!in->full_said)
			g_warning("%s: more than %u requests in progress: "
				  "those beyond are not kept for a successor",
				  in->name, N_SLOTS);
		in->full_said = TRUE;
		return;
	}
	i = in->free[--in->n_free];
	s = &in->slots[i];
	memcpy(s->data, req, len);
	s->len = (guint32)len;
	s->replays = 0;
	s->interrupted = 0;
	if (i >= in->header->used)
		in->header->used = i + 1;
	/* Last: a server killed before this store leaves the slot free. */
	__atomic_store_n(&s->unique, h->unique, __ATOMIC_RELEASE);
	if (in->n_fresh < FRESH_MAX) {
		in->fresh[in->n_fresh].unique = h->unique;
		in->fresh[in->n_fresh].slot = i;
		__atomic_store_n(&in->n_fresh, in->n_fresh + 1,
				 __ATOMIC_RELEASE);
	} else {
		wait_for_answer(in, h->unique, i);
	}
}

gssize pf_inflight_read(struct pf_inflight *in, int fd, void *buf, gsize len)
{
	gint r = in ? reader_of(in, buf) : -1;
	gssize n = read(fd, buf, r >= 0 ? MIN(len, READER_BYTES) : len);

	if (n <= 0 || !in)
		return n;
	g_mutex_lock(&in->lock);
	if ((gsize)n >= sizeof(struct fuse_in_header) &&
	    ((const struct fuse_in_header *)buf)->opcode == FUSE_INTERRUPT)
		note_interrupt(in, buf);
	keep(in, buf, (gsize)n);
	/* After the slot: a server killed in between leaves the request in
	 * both, which a successor takes once. */
	if (r >= 0 && (gsize)n >= sizeof(struct fuse_in_header))
		__atomic_store_n(&in->header->seen[r],
				 ((const struct fuse_in_header *)buf)->unique,
				 __ATOMIC_RELEASE);
	g_mutex_unlock(&in->lock);
	return n;
}

/* Removes unique from fresh: TRUE if it was there (*slot: its slot). */
static gboolean take_fresh(struct pf_inflight *in, guint64 unique,
			   guint32 *slot)
{
	for (guint k = 0; k < in->n_fresh; k++)
		if (in->fresh[k].unique == unique) {
			*slot = in->fresh[k].slot;
			in->fresh[k] = in->fresh[in->n_fresh - 1];
			__atomic_store_n(&in->n_fresh, in->n_fresh - 1,
					 __ATOMIC_RELEASE);
			return TRUE;
		}
	return FALSE;
}

void pf_inflight_processed(struct pf_inflight *in, guint64 unique)
{
	guint32 i;

	/* Most requests are answered while processed, and taken out of
	 * fresh then: no lock for them.  A request this thread kept and
	 * that is still fresh keeps n_fresh above 0 for this thread's load
	 * (the same thread stored it); others' keeps only add. */
	if (!in || !unique || !__atomic_load_n(&in->n_fresh, __ATOMIC_ACQUIRE))
		return;
	g_mutex_lock(&in->lock);
	if (take_fresh(in, unique, &i))
		wait_for_answer(in, unique, i);
	g_mutex_unlock(&in->lock);
}

void pf_inflight_replaying(struct pf_inflight *in, guint64 unique,
			   gboolean returned)
{
	struct slot *s;

	if (!in)
		return;
	g_mutex_lock(&in->lock);
	/* Counted before the processing, so that a server it kills has
	 * counted it; cleared once the processing returned. */
	if ((s = waiting_slot(in, unique)))
		s->replays = returned ? 0 : s->replays + 1;
	g_mutex_unlock(&in->lock);
}

void pf_inflight_answered(struct pf_inflight *in, guint64 unique)
{
	gpointer key, value;
	guint32 i;

	if (!in || !unique)
		return;
	g_mutex_lock(&in->lock);
	if (take_fresh(in, unique, &i)) {
		release(in, i);
	} else if (g_hash_table_lookup_extended(in->waiting, &unique, &key,
						&value)) {
		release(in, GPOINTER_TO_UINT(value) - 1);
		g_hash_table_remove(in->waiting, &unique);
	}
	g_mutex_unlock(&in->lock);
}

void pf_inflight_forget_all(struct pf_inflight *in)
{
	GHashTableIter iter;
	gpointer value;

	if (!in)
		return;
	g_mutex_lock(&in->lock);
	g_hash_table_iter_init(&iter, in->waiting);
	while (g_hash_table_iter_next(&iter, NULL, &value)) {
		release(in, GPOINTER_TO_UINT(value) - 1);
		g_hash_table_iter_remove(&iter);
	}
	g_mutex_unlock(&in->lock);
}
