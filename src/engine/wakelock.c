/* wakelock.c - user-space wake locks (the kernel's kernel/power/wakelock.c).
 *
 * Each name written to wake_lock becomes a wakeup source.  Locks are not
 * reference counted: locking again only signals another event, and one
 * unlock releases.  The number of locks is limited, and unused ones are
 * garbage collected: every 101st unlock walks the locks from the least
 * recently used and destroys the inactive ones that have been idle for the GC
 * time, stopping at the first one that has not.  Past GC_BATCH of them, the
 * rest go from the main loop, as the kernel's work item would take them.
 */
#include <errno.h>
#include <string.h>

#include "powerfs/engine/wakelock.h"

/* Unlocks between two collections (the kernel's WL_GC_COUNT_MAX). */
#define GC_EVERY 100
/* Locks destroyed in one go.  The kernel collects in a work item; here a
 * collection runs in the unlock's request, under the loop lock, and with
 * --wakelock-limit=0 it can meet tens of thousands of idle locks.  Past
 * this many, the rest is collected from the main loop,
 * a batch at a time, so no request or dispatch holds the loop long. */
#define GC_BATCH 1024

struct wakelock {
	struct wakeup_source *ws;
	GList lru; /* in wakelocks->lru, most recently used first */
};

struct wakelocks {
	struct wakeup_engine *engine;
	struct pf_clock *clock;
	GHashTable *by_name; /* name (the source's) -> struct wakelock */
	GQueue lru;
	guint limit;
	gint64 gc_idle_us;
	guint unlocks_since_gc;
	guint gc_more; /* idle source finishing a collection */
};

struct wakelocks *wakelocks_new(struct wakeup_engine *engine,
				struct pf_clock *clock, guint limit,
				guint gc_seconds)
{
	struct wakelocks *wls = g_new0(struct wakelocks, 1);

	wls->engine = engine;
	wls->clock = clock;
	wls->by_name = g_hash_table_new(g_str_hash, g_str_equal);
	g_queue_init(&wls->lru);
	wls->limit = limit;
	wls->gc_idle_us = (gint64)gc_seconds * G_USEC_PER_SEC;
	return wls;
}

static void wakelock_destroy(struct wakelocks *wls, struct wakelock *wl)
{
	g_hash_table_remove(wls->by_name, wakeup_source_name(wl->ws));
	g_queue_unlink(&wls->lru, &wl->lru);
	wakeup_source_unregister(wl->ws);
	g_free(wl);
}

void wakelocks_free(struct wakelocks *wls)
{
	GList *l;

	if (!wls)
		return;
	g_clear_handle_id(&wls->gc_more, g_source_remove);
	while ((l = g_queue_peek_head_link(&wls->lru)))
		wakelock_destroy(wls, l->data);
	g_hash_table_destroy(wls->by_name);
	g_free(wls);
}

static struct wakelock *lookup(const struct wakelocks *wls, const char *name,
			       gsize len)
{
	/* Names come from writes and are not NUL-terminated at len; the
	 * usual short ones need no allocation on this hot path. */
	char small[128];
	g_autofree char *big = NULL;
	char *key = len < sizeof(small) ? small : (big = g_malloc(len + 1));

	memcpy(key, name, len);
	key[len] = '\0';
	return g_hash_table_lookup(wls->by_name, key);
}

static struct wakelock *wakelock_new(struct wakelocks *wls, const char *name,
				     gsize len)
{
	struct wakelock *wl = g_new0(struct wakelock, 1);

	wl->ws = wakeup_source_register(wls->engine, name, len);
	wl->lru.data = wl;
	g_queue_push_head_link(&wls->lru, &wl->lru);
	g_hash_table_insert(wls->by_name, (gpointer)wakeup_source_name(wl->ws),
			    wl);
	return wl;
}

static void mark_used(struct wakelocks *wls, struct wakelock *wl)
{
	g_queue_unlink(&wls->lru, &wl->lru);
	g_queue_push_head_link(&wls->lru, &wl->lru);
}

int wakelocks_lock(struct wakelocks *wls, const char *name, gsize len,
		   guint64 timeout_ns, const struct pf_caller *caller)
{
	struct wakelock *wl = lookup(wls, name, len);
	/* Round up to whole milliseconds.  Deviation: the kernel's
	 * arithmetic wraps for the largest values; cap instead. */
	guint64 ms = timeout_ns / 1000000 + (timeout_ns % 1000000 != 0);
	struct pf_event ev = { .type = PF_EVENT_LOCK,
			       .caller = caller,
			       .name = name,
			       .len = len,
			       .timeout_ms = (guint32)MIN(ms, G_MAXUINT32),
			       .created = !wl,
			       .was_active =
				       wl && wakeup_source_active(wl->ws) };

	if (!wl) {
		if (wls->limit && g_hash_table_size(wls->by_name) >= wls->limit)
			return -ENOSPC;
		wl = wakelock_new(wls, name, len);
	}
	if (timeout_ns)
		wakeup_source_event(wl->ws, ev.timeout_ms);
	else
		wakeup_source_stay_awake(wl->ws);
	mark_used(wls, wl);
	pf_events_publish(wakeup_events(wls->engine), &ev);
	return 0;
}

static gboolean collect_more(gpointer data);

/* Walks from the least recently used lock; stops at the first one not
 * idle for the GC time, or after GC_BATCH destroyed, and then finishes
 * from the main loop (a lock used meanwhile has moved to the front: each
 * batch starts again from the tail; active locks are only looked at). */
static void collect_garbage(struct wakelocks *wls)
{
	gint64 now = pf_clock_now(wls->clock);
	GList *l = wls->lru.tail;
	guint destroyed = 0;

	while (l) {
		struct wakelock *wl = l->data;

		l = l->prev;
		if (now - wakeup_source_last_change(wl->ws) < wls->gc_idle_us)
			break;
		if (!wakeup_source_active(wl->ws)) {
			if (destroyed == GC_BATCH) {
				if (!wls->gc_more)
					wls->gc_more =
						g_idle_add(collect_more, wls);
				break;
			}
			pf_events_publish(
				wakeup_events(wls->engine),
				&(struct pf_event){ .type = PF_EVENT_GC,
						    .source = wl->ws });
			wakelock_destroy(wls, wl);
			destroyed++;
		}
	}
	wls->unlocks_since_gc = 0;
}

static gboolean collect_more(gpointer data)
{
	struct wakelocks *wls = data;
	guint unlocks = wls->unlocks_since_gc;

	wls->gc_more = 0;
	collect_garbage(wls);
	wls->unlocks_since_gc = unlocks; /* not a collection of its own */
	return G_SOURCE_REMOVE;
}

int wakelocks_unlock(struct wakelocks *wls, const char *name, gsize len,
		     const struct pf_caller *caller)
{
	struct wakelock *wl = lookup(wls, name, len);

	if (!wl)
		return -EINVAL;
	/* Before the unlock: it may collect garbage, which comes after. */
	pf_events_publish(wakeup_events(wls->engine),
			  &(struct pf_event){
				  .type = PF_EVENT_UNLOCK,
				  .caller = caller,
				  .name = name,
				  .len = len,
				  .was_active = wakeup_source_active(wl->ws) });
	wakeup_source_relax(wl->ws);
	mark_used(wls, wl);
	if (++wls->unlocks_since_gc > GC_EVERY)
		collect_garbage(wls);
	return 0;
}

struct wakeup_source *wakelocks_lookup(const struct wakelocks *wls,
				       const char *name, gsize len)
{
	struct wakelock *wl = lookup(wls, name, len);

	return wl ? wl->ws : NULL;
}

guint wakelocks_count(const struct wakelocks *wls)
{
	return g_hash_table_size(wls->by_name);
}

static gint compare_names(gconstpointer a, gconstpointer b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Like sysfs_emit_at() into a page: the content stops at 4095 bytes. */
#define SHOW_MAX 4095

void wakelocks_show(const struct wakelocks *wls, gboolean active, GString *out)
{
	g_autoptr(GPtrArray) names = g_ptr_array_new();
	gsize start = out->len, len = 0;
	GHashTableIter it;
	gpointer key, value;

	g_hash_table_iter_init(&it, wls->by_name);
	while (g_hash_table_iter_next(&it, &key, &value))
		if (wakeup_source_active(((struct wakelock *)value)->ws) ==
		    active)
			g_ptr_array_add(names, key);
	g_ptr_array_sort(names, compare_names);

	for (guint i = 0; i < names->len && len < SHOW_MAX; i++) {
		const char *name = names->pdata[i];
		gsize n = MIN(strlen(name), SHOW_MAX - len);

		g_string_append_len(out, name, n);
		len += n;
		if (len < SHOW_MAX) {
			g_string_append_c(out, ' ');
			len++;
		}
	}
	/* The kernel drops the last byte written (the trailing space, or the
	 * last byte of a name cut at the page end) and ends the line. */
	if (len > 0)
		g_string_truncate(out, start + --len);
	g_string_append_c(out, '\n');
}

struct visit_locks {
	const struct wakelocks *wls;
	wakeup_source_visit visit;
	gpointer data;
};

static void visit_if_lock(const struct wakeup_source *ws, gpointer data)
{
	struct visit_locks *v = data;
	struct wakelock *wl =
		g_hash_table_lookup(v->wls->by_name, wakeup_source_name(ws));

	if (wl && wl->ws == ws)
		v->visit(ws, v->data);
}

void wakelocks_foreach(const struct wakelocks *wls, wakeup_source_visit visit,
		       gpointer data)
{
	struct visit_locks v = { wls, visit, data };

	wakeup_foreach_source_oldest_first(wls->engine, visit_if_lock, &v);
}

struct wakeup_source *wakelocks_restore(struct wakelocks *wls, const char *name)
{
	gsize len = strlen(name);
	struct wakelock *wl = lookup(wls, name, len);

	if (!wl) {
		if (wls->limit && g_hash_table_size(wls->by_name) >= wls->limit)
			return NULL;
		wl = wakelock_new(wls, name, len);
	}
	mark_used(wls, wl);
	return wl->ws;
}
