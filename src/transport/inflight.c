/* inflight.c - the requests a server has read and not answered yet, kept
 * where its successor finds them.
 *
 * Once a server has read a request from /dev/fuse, the kernel waits for
 * that server's answer, and its caller waits with it, uninterruptibly, even
 * through SIGKILL.  If the server dies first, Linux 6.9 and later can send
 * such requests again to the next server (FUSE_NOTIFY_RESEND).  Before 6.9
 * nothing does: a blocked wakeup_count reader, a state writer or a lookup
 * would wait until the mount goes (a lost lookup also hangs every later
 * open of that name).  So on such a kernel each request is copied into the
 * session file (the keeper's memfd, which outlives servers) before it is
 * processed, and the copy is dropped once its answer is written.  A
 * successor processes the copies again, and its answers carry the
 * requests' own ids, which the kernel is still waiting for on this
 * connection.  On a kernel that sends requests again nothing is copied
 * (pf_inflight_set_resend()).
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
 * (fs.c), not run twice.  The successor processes all of them before any
 * new request (take-over.c), so a copy processed again never undoes what
 * a later request did.  And the kernel sends an INTERRUPT once: when one
 * is read, the request it names is marked in its slot, and a successor
 * answers that request EINTR instead of processing it again.
 *
 * And a server can die inside read(2): the kernel has handed it a request
 * and copied it out, and the process ends on its way back to user space,
 * before any code of ours could keep it.  That is why the readers read into
 * buffers in the same memfd: the kernel's copy lands in the shared pages
 * themselves.  The header records, per reader, the id of the last request
 * its code saw; a buffer holding another one holds a request that was read
 * and never seen, which a successor processes too.  An INIT there is the
 * connection's: its first server died before it saved it (take-over.c),
 * whether or not its code saw it.
 *
 * On every kernel the header also names the request being processed (with
 * the loop lock held, one at a time).  If its server dies of a crash (the
 * keeper says so: not a SIGKILL from outside), the successor counts a
 * death against that request; one that crashed MAX_DEATHS servers in turn
 * is answered EIO instead of being processed again, on both paths.
 *
 * The record, shared mappings of the memfd from AREA_OFFSET on (the INIT
 * request lies before): a header, PF_INFLIGHT_READERS read buffers, then
 * the slots, an area that grows as needed, so that every request waiting
 * is kept however many wait.  A slot holds one request of up to a read
 * buffer's size; its unique (the request's id, never 0) is written last and
 * cleared first, so a slot with unique 0 is free whatever else it holds.
 * Slots are taken lowest first and "used" bounds the ones ever taken, so
 * that a successor reads only those (reading a hole of a memfd would
 * allocate it; the pages of a read buffer past its first few are never
 * touched either).  Sizes follow the page size and the connection's
 * max_write, both recorded in the header.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fuse.h>

#include "powerfs/transport/inflight.h"

/* A multiple of every page size Linux has (up to 64 KiB). */
#define AREA_OFFSET (64 * 1024)
#define MAGIC "pfinfl04"
/* A request that crashed this many servers in turn is answered EIO: the
 * kernel (or a successor's copy) would hand it to each new server, and the
 * keeper gives up after five crashes. */
#define MAX_DEATHS 3
#define N_DEATHS 8
/* The bit the kernel sets in the id of a request it sends again. */
#define UNIQUE_RESEND (G_GUINT64_CONSTANT(1) << 63)
/* The most a legacy connection may hand us in a write: libfuse's default,
 * 256 pages, which a server before this layout negotiated. */
#define LEGACY_MAX_PAGES 256
/* Room for a request's headers beside max_write bytes of data (libfuse
 * keeps a page; the kernel needs 80 bytes). */
#define HEADER_ROOM 4096
/* A sanity bound on sizes read back from the session file. */
#define MAX_READ_BYTES (64u << 20)
#define FIRST_SLOTS 64

struct area_header {
	char magic[8];
	guint32 page_bytes;		   /* the page size that laid it out */
	guint32 max_write;		   /* what this connection negotiated */
	guint32 read_bytes;		   /* each read buffer */
	guint32 slot_bytes;		   /* one slot */
	guint32 n_slots;		   /* slots the file holds */
	guint32 used;			   /* slots [0, used) have been taken */
	guint64 seen[PF_INFLIGHT_READERS]; /* last request each saw */
	guint64 processing; /* id (no resend bit) being processed, or 0 */
	struct {
		guint64 unique; /* 0: free */
		guint32 deaths; /* servers it crashed in turn */
		guint32 pad;
	} deaths[N_DEATHS];
};

struct slot {
	guint64 unique; /* 0: free */
	guint32 len;
	guint16 interrupted; /* its caller was signalled (an INTERRUPT) */
	guint16 pad;
	unsigned char data[]; /* len bytes, at most read_bytes */
};

/* Kept requests that their reader has not finished processing: a reader
 * keeps a request as soon as it has read it, before it waits for the loop
 * lock (a server killed meanwhile must not lose it), so there are at most
 * as many as readers.  Later, one not answered yet moves to waiting. */
#define FRESH_MAX 8

struct pf_inflight {
	GMutex lock; /* readers keep requests outside the loop lock */
	char *name;
	int fd;
	gsize page;
	void *map; /* header and read buffers */
	gsize map_bytes;
	struct area_header *header;
	char *readers; /* PF_INFLIGHT_READERS buffers */
	gsize read_bytes, slot_bytes;
	off_t slots_offset;
	char *slots; /* n_slots slots, mapped (or NULL) */
	gsize slots_map_bytes;
	GArray *free; /* guint32, a stack, lowest index on top */
	struct {
		guint64 unique;
		guint32 slot;
	} fresh[FRESH_MAX];
	guint n_fresh;	       /* written under lock, read without too */
	GHashTable *waiting;   /* unique -> slot index + 1 */
	GBytes *buffered_init; /* an INIT found in a read buffer */
	gint keeping;	       /* copies are made (no FUSE_NOTIFY_RESEND) */
	gboolean full_said;
};

static gsize round_up(gsize n, gsize to)
{
	return (n + to - 1) / to * to;
}

static gsize page_size(void)
{
	long n = sysconf(_SC_PAGESIZE);

	return n > 0 ? (gsize)n : 4096;
}

guint32 pf_inflight_max_write(void)
{
	return (guint32)(2 * page_size());
}

static gsize header_bytes(gsize page)
{
	return round_up(sizeof(struct area_header), page);
}

/* Requests the kernel expects no answer to, or that are kept elsewhere
 * (INIT, take-over.c). */
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

static struct slot *slot_at(struct pf_inflight *in, guint32 i)
{
	return (struct slot *)(in->slots + (gsize)i * in->slot_bytes);
}

static gboolean slot_valid(struct pf_inflight *in, const struct slot *s)
{
	const struct fuse_in_header *h = (const void *)s->data;

	return s->len >= sizeof(*h) && s->len <= in->read_bytes &&
	       h->len == s->len && h->unique == s->unique;
}

static gint by_unique(gconstpointer a, gconstpointer b)
{
	const struct fuse_in_header *x = g_bytes_get_data(*(GBytes **)a, NULL);
	const struct fuse_in_header *y = g_bytes_get_data(*(GBytes **)b, NULL);

	return x->unique < y->unique ? -1 : x->unique > y->unique;
}

/* Maps slots [0, n) (the file is made long enough first); the mapping may
 * move: slots are only reached through in->slots, under the lock or
 * alone. */
static gboolean map_slots(struct pf_inflight *in, guint32 n)
{
	gsize bytes = round_up((gsize)n * in->slot_bytes, in->page);
	struct stat st;
	void *m;

	if (bytes <= in->slots_map_bytes)
		return TRUE;
	if (fstat(in->fd, &st) < 0 ||
	    (st.st_size < in->slots_offset + (off_t)bytes &&
	     ftruncate(in->fd, in->slots_offset + (off_t)bytes) < 0))
		return FALSE;
	m = in->slots ? mremap(in->slots, in->slots_map_bytes, bytes,
			       MREMAP_MAYMOVE) :
			mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
			     in->fd, in->slots_offset);
	if (m == MAP_FAILED)
		return FALSE;
	in->slots = m;
	in->slots_map_bytes = bytes;
	return TRUE;
}

/* Room for more slots: doubles the area.  With the lock held (or alone). */
static gboolean grow(struct pf_inflight *in)
{
	guint32 old = in->header->n_slots;
	guint32 n = old ? MIN((guint64)old * 2, G_MAXUINT32 / 2) : FIRST_SLOTS;

	if (n <= old || !map_slots(in, n)) {
		if (!in->full_said)
			g_warning("%s: cannot keep more than %u requests in "
				  "progress for a successor (%s): those beyond "
				  "are lost if the server dies on a kernel "
				  "before 6.9",
				  in->name, old, g_strerror(errno));
		in->full_said = TRUE;
		return FALSE;
	}
	for (guint32 i = n; i-- > old;)
		g_array_append_val(in->free, i);
	in->header->n_slots = n;
	return TRUE;
}

/* A free slot, taken, or G_MAXUINT32.  With the lock held (or alone). */
static guint32 take_slot(struct pf_inflight *in)
{
	guint32 i;

	if (!in->free->len && !grow(in))
		return G_MAXUINT32;
	i = g_array_index(in->free, guint32, in->free->len - 1);
	g_array_set_size(in->free, in->free->len - 1);
	if (i >= in->header->used)
		in->header->used = i + 1;
	return i;
}

static void release(struct pf_inflight *in, guint32 i)
{
	__atomic_store_n(&slot_at(in, i)->unique, 0, __ATOMIC_RELEASE);
	g_array_append_val(in->free, i);
}

/* Copies a request into a free slot: its index, or G_MAXUINT32. */
static guint32 store(struct pf_inflight *in, const void *req, gsize len)
{
	const struct fuse_in_header *h = req;
	guint32 i = take_slot(in);
	struct slot *s;

	if (i == G_MAXUINT32)
		return i;
	s = slot_at(in, i);
	memcpy(s->data, req, len);
	s->len = (guint32)len;
	s->interrupted = 0;
	/* Last: a server killed before this store leaves the slot free. */
	__atomic_store_n(&s->unique, h->unique, __ATOMIC_RELEASE);
	return i;
}

static void wait_for_answer(struct pf_inflight *in, guint64 unique, guint32 i)
{
	g_hash_table_insert(in->waiting, g_memdup2(&unique, sizeof(unique)),
			    GUINT_TO_POINTER(i + 1));
}

/* The deaths counted against request unique (no resend bit). */
static guint32 deaths_of(const struct pf_inflight *in, guint64 unique)
{
	for (guint k = 0; k < N_DEATHS; k++)
		if (in->header->deaths[k].unique == unique)
			return in->header->deaths[k].deaths;
	return 0;
}

/* One more death against request unique; a full table forgets the entry
 * with the fewest. */
static void count_death(struct pf_inflight *in, guint64 unique)
{
	guint best = 0;

	for (guint k = 0; k < N_DEATHS; k++) {
		if (in->header->deaths[k].unique == unique) {
			in->header->deaths[k].deaths++;
			return;
		}
		if (in->header->deaths[k].deaths <
		    in->header->deaths[best].deaths)
			best = k;
	}
	in->header->deaths[best].unique = unique;
	in->header->deaths[best].deaths = 1;
}

static void forget_deaths(struct pf_inflight *in, guint64 unique)
{
	for (guint k = 0; k < N_DEATHS; k++)
		if (in->header->deaths[k].unique == unique)
			in->header->deaths[k].unique =
				in->header->deaths[k].deaths = 0;
}

/* A request a previous server left, in slot i: to be processed again
 * (left), or answered with an error (refused): EINTR if its caller was
 * signalled meanwhile (the kernel sent an INTERRUPT, which the dead server
 * read and never answered; it is not sent again), EIO if it crashed too
 * many servers already. */
static void take_left(struct pf_inflight *in, guint32 i, GPtrArray *left,
		      GArray *refused)
{
	struct slot *s = slot_at(in, i);
	struct pf_refusal r = { s->unique, 0 };

	if (s->interrupted)
		r.err = EINTR;
	else if (deaths_of(in, s->unique) >= MAX_DEATHS)
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
	return slot_at(in, GPOINTER_TO_UINT(value) - 1);
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
			slot_at(in, in->fresh[k].slot)->interrupted = 1;
			return;
		}
	if ((s = waiting_slot(in, arg->unique)))
		s->interrupted = 1;
}

/* A read buffer holding a request its reader's code never saw (the server
 * died inside read(2)): into a slot, as if kept at once.  An INIT there is
 * taken whatever its reader saw: the caller knows whether it was saved. */
static void rescue_unseen(struct pf_inflight *in, guint r)
{
	const struct fuse_in_header *h =
		(const void *)(in->readers + (gsize)r * in->read_bytes);
	guint32 i;

	if (!h->unique || h->len < sizeof(*h) || h->len > in->read_bytes)
		return;
	if (h->opcode == FUSE_INIT && !in->buffered_init)
		in->buffered_init = g_bytes_new(h, h->len);
	if (h->unique == in->header->seen[r])
		return;
	if (h->opcode == FUSE_INTERRUPT)
		note_interrupt(in, h);
	if (answered_later(h->opcode) &&
	    !g_hash_table_contains(in->waiting, &h->unique) &&
	    (i = store(in, h, h->len)) != G_MAXUINT32)
		wait_for_answer(in, h->unique, i);
	in->header->seen[r] = h->unique;
}

/* What a previous server left: the requests in slots, and those read into
 * a buffer and never seen. */
static void find_left(struct pf_inflight *in, GPtrArray *left, GArray *refused)
{
	struct area_header *h = in->header;
	g_autofree gboolean *taken = g_new0(gboolean, h->n_slots);
	GHashTableIter iter;
	gpointer value;

	for (guint32 i = 0; i < h->used; i++) {
		struct slot *s = slot_at(in, i);

		if (!s->unique)
			continue;
		if (!slot_valid(in, s)) {
			g_warning("%s: a damaged record of a request in slot "
				  "%u is dropped",
				  in->name, i);
			s->unique = 0;
			continue;
		}
		taken[i] = TRUE;
		wait_for_answer(in, s->unique, i);
	}
	for (guint32 i = h->n_slots; i-- > 0;)
		if (!taken[i])
			g_array_append_val(in->free, i);
	for (guint r = 0; r < PF_INFLIGHT_READERS; r++)
		rescue_unseen(in, r);
	g_hash_table_iter_init(&iter, in->waiting);
	while (g_hash_table_iter_next(&iter, NULL, &value))
		take_left(in, GPOINTER_TO_UINT(value) - 1, left, refused);
	g_ptr_array_sort(left, by_unique);
}

/* The sizes of a record for a connection whose writes are at most
 * max_write bytes. */
static void set_sizes(struct pf_inflight *in, guint32 max_write)
{
	in->read_bytes = round_up((gsize)max_write + HEADER_ROOM, in->page);
	in->slot_bytes = round_up(sizeof(struct slot) + in->read_bytes, 64);
	in->map_bytes = header_bytes(in->page) +
			(gsize)PF_INFLIGHT_READERS * in->read_bytes;
	in->slots_offset = AREA_OFFSET + (off_t)in->map_bytes;
}

/* A header this powerfs laid out, on this kernel, that the file holds:
 * its sizes are set then. */
static gboolean usable(struct pf_inflight *in, const struct area_header *h,
		       off_t file_bytes)
{
	if (memcmp(h->magic, MAGIC, sizeof(h->magic)) ||
	    h->page_bytes != in->page || h->max_write < 4096 ||
	    h->max_write > MAX_READ_BYTES)
		return FALSE;
	set_sizes(in, h->max_write);
	return h->read_bytes == in->read_bytes &&
	       h->slot_bytes == in->slot_bytes && h->used <= h->n_slots &&
	       in->slots_offset + (off_t)h->n_slots * (off_t)in->slot_bytes <=
		       file_bytes;
}

/* The max_write of a connection without our record: ours if it is new (no
 * INIT saved yet), else the one a server before this layout negotiated. */
static guint32 connection_max_write(int session_fd)
{
	guint32 init_saved = 0;

	if (pread(session_fd, &init_saved, sizeof(init_saved), 0) !=
		    sizeof(init_saved) ||
	    !init_saved)
		return pf_inflight_max_write();
	return (guint32)(LEGACY_MAX_PAGES * page_size());
}

static void init_header(struct pf_inflight *in, guint32 max_write)
{
	struct area_header *h = in->header;

	memset(h, 0, sizeof(*h));
	h->page_bytes = (guint32)in->page;
	h->max_write = max_write;
	h->read_bytes = (guint32)in->read_bytes;
	h->slot_bytes = (guint32)in->slot_bytes;
	/* The magic last: a header a crash cut short has none, and is not
	 * taken for ours. */
	memcpy(h->magic, MAGIC, sizeof(h->magic));
}

static struct pf_inflight *open_failed(struct pf_inflight *in)
{
	g_warning("%s: cannot keep the requests in progress for a successor "
		  "(%s): after a crash on Linux before 6.9 their callers would "
		  "wait until the mount goes",
		  in->name, g_strerror(errno));
	pf_inflight_free(in);
	return NULL;
}

struct pf_inflight *pf_inflight_open(int session_fd, const char *name,
				     gboolean crashed, GPtrArray **left,
				     GArray **refused)
{
	struct area_header probe = { 0 };
	struct pf_inflight *in;
	gboolean ours;
	struct stat st;
	void *map;

	*left = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
	*refused = g_array_new(FALSE, FALSE, sizeof(struct pf_refusal));
	if (session_fd < 0)
		return NULL;
	in = g_new0(struct pf_inflight, 1);
	in->name = g_strdup(name);
	in->fd = session_fd;
	in->page = page_size();
	in->keeping = TRUE;
	g_mutex_init(&in->lock);
	in->waiting = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
					    NULL);
	in->free = g_array_new(FALSE, FALSE, sizeof(guint32));
	if (fstat(session_fd, &st) < 0)
		return open_failed(in);
	ours = pread(session_fd, &probe, sizeof(probe), AREA_OFFSET) ==
		       sizeof(probe) &&
	       usable(in, &probe, st.st_size);
	if (!ours) {
		if (probe.magic[0])
			g_warning("%s: the record of requests in progress has "
				  "another layout (an older powerfs?): not "
				  "used",
				  name);
		set_sizes(in, connection_max_write(session_fd));
	}
	if ((st.st_size < AREA_OFFSET + (off_t)in->map_bytes &&
	     ftruncate(session_fd, AREA_OFFSET + (off_t)in->map_bytes) < 0) ||
	    (map = mmap(NULL, in->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
			session_fd, AREA_OFFSET)) == MAP_FAILED)
		return open_failed(in);
	in->map = map;
	in->header = map;
	in->readers = (char *)map + header_bytes(in->page);
	if (!ours) {
		init_header(in, connection_max_write(session_fd));
		return in;
	}
	if (!map_slots(in, in->header->n_slots))
		return open_failed(in);
	/* The request the previous server was processing when it died. */
	if (in->header->processing && crashed)
		count_death(in, in->header->processing);
	in->header->processing = 0;
	find_left(in, *left, *refused);
	return in;
}

void pf_inflight_free(struct pf_inflight *in)
{
	if (!in)
		return;
	if (in->slots)
		munmap(in->slots, in->slots_map_bytes);
	if (in->map)
		munmap(in->map, in->map_bytes);
	g_hash_table_unref(in->waiting);
	g_array_unref(in->free);
	if (in->buffered_init)
		g_bytes_unref(in->buffered_init);
	g_mutex_clear(&in->lock);
	g_free(in->name);
	g_free(in);
}

GBytes *pf_inflight_take_buffered_init(struct pf_inflight *in)
{
	return in ? g_steal_pointer(&in->buffered_init) : NULL;
}

void *pf_inflight_read_buffer(struct pf_inflight *in, guint reader, gsize *size)
{
	if (!in || reader >= PF_INFLIGHT_READERS)
		return NULL;
	*size = in->read_bytes;
	return in->readers + (gsize)reader * in->read_bytes;
}

/* Which reader's buffer in the session file buf is (its index), or -1 if
 * buf is none of them (a buffer libfuse allocated itself). */
static gint reader_of(const struct pf_inflight *in, const void *buf)
{
	gsize off = (gsize)((const char *)buf - in->readers);

	if ((const char *)buf < in->readers ||
	    off >= (gsize)PF_INFLIGHT_READERS * in->read_bytes ||
	    off % in->read_bytes)
		return -1;
	return (gint)(off / in->read_bytes);
}

static void keep(struct pf_inflight *in, const void *req, gsize len)
{
	const struct fuse_in_header *h = req;
	guint32 i;

	if (len < sizeof(*h) || !answered_later(h->opcode) ||
	    len > in->read_bytes || !h->unique)
		return;
	if ((i = store(in, req, len)) == G_MAXUINT32)
		return;
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
	/* The whole buffer: what the kernel requires (max_write and the
	 * headers) whatever libfuse thinks the connection negotiated. */
	gssize n = read(fd, buf, r >= 0 ? in->read_bytes : len);
	const struct fuse_in_header *h = buf;

	if (n < (gssize)sizeof(*h) || !in)
		return n;
	if (!g_atomic_int_get(&in->keeping)) {
		if (r >= 0)
			__atomic_store_n(&in->header->seen[r], h->unique,
					 __ATOMIC_RELEASE);
		return n;
	}
	g_mutex_lock(&in->lock);
	if (h->opcode == FUSE_INTERRUPT)
		note_interrupt(in, h);
	keep(in, buf, (gsize)n);
	/* After the slot: a server killed in between leaves the request in
	 * both, which a successor takes once. */
	if (r >= 0)
		__atomic_store_n(&in->header->seen[r], h->unique,
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

gboolean pf_inflight_begin(struct pf_inflight *in, guint64 unique,
			   guint32 opcode)
{
	guint64 id = unique & ~UNIQUE_RESEND;

	if (!in || !id || !answered_later(opcode))
		return TRUE;
	if (deaths_of(in, id) >= MAX_DEATHS)
		return FALSE;
	__atomic_store_n(&in->header->processing, id, __ATOMIC_RELEASE);
	return TRUE;
}

void pf_inflight_end(struct pf_inflight *in, guint64 unique)
{
	guint64 id = unique & ~UNIQUE_RESEND;
	guint32 i;

	if (!in || !id)
		return;
	if (in->header->processing == id) {
		__atomic_store_n(&in->header->processing, 0, __ATOMIC_RELEASE);
		forget_deaths(in, id);
	}
	/* Most requests are answered while processed, and taken out of
	 * fresh then: no lock for them.  A request this thread kept and
	 * that is still fresh keeps n_fresh above 0 for this thread's load
	 * (the same thread stored it); others' keeps only add. */
	if (!__atomic_load_n(&in->n_fresh, __ATOMIC_ACQUIRE))
		return;
	g_mutex_lock(&in->lock);
	if (take_fresh(in, unique, &i))
		wait_for_answer(in, unique, i);
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

void pf_inflight_set_resend(struct pf_inflight *in, gboolean resend)
{
	GHashTableIter iter;
	gpointer value;

	if (!in)
		return;
	g_mutex_lock(&in->lock);
	g_atomic_int_set(&in->keeping, !resend);
	if (resend) {
		g_hash_table_iter_init(&iter, in->waiting);
		while (g_hash_table_iter_next(&iter, NULL, &value)) {
			release(in, GPOINTER_TO_UINT(value) - 1);
			g_hash_table_iter_remove(&iter);
		}
		while (in->n_fresh)
			release(in, in->fresh[--in->n_fresh].slot);
	}
	g_mutex_unlock(&in->lock);
}
