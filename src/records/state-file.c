/* state-file.c - what powerfs knows, kept across a restart within one boot.
 *
 * A container's wake locks must survive a crash, a restart or an upgrade of
 * powerfs.  The state lives in an append-only log: one line per object
 * whenever it changes (a wake lock with its whole state and statistics,
 * the counters and the handshake, the autosleep setting, suspend_stats,
 * the owners and modes), the last line of an object being its state.  So
 * what a second of churn writes grows with the churn, not with the number
 * of locks.  When the log is full (room for COMPACT_FACTOR times its last
 * snapshot, COMPACT_MIN at least), a fresh snapshot replaces it (written
 * beside it, then renamed over it).
 *
 * Lines reach the file before the request that caused them is answered
 * (fs.c's before-reply hook), and a crash of powerfs cannot lose them.
 * Changes made from the main loop (a timeout, an autosleep cycle, a
 * suspend's end) are written before the loop next sleeps.  Nothing is ever
 * fsync()ed: only a crash of the whole system can lose what is in the page
 * cache, and the system then boots again, and on a new boot powerfs starts
 * clean, as the kernel does.  The header names the boot
 * (/proc/sys/kernel/random/boot_id).
 *
 * Why a shared mapping, not write(2): appending a line is then a memcpy,
 * no system call, where a write(2) per request would add a third to the
 * system calls of a lock or unlock (a read of the request, a write of the
 * reply, a write of the line).  A store to a
 * MAP_SHARED mapping of a file lands in the very page of the page cache
 * that read(2) and writeback see, at once: a powerfs killed right after
 * its memcpy loses nothing that a returned write(2) would have kept, and
 * the kernel writes the dirty pages back by itself (munmap, exit, SIGKILL
 * included).  So each file is made at its full capacity, zero-padded, and
 * mapped whole; the log ends at the first NUL byte.
 *
 * Two ways a mapping can fail where write(2) returned an error, both
 * turned away here.  A store into a page the file system cannot give
 * (disk full, quota, a tmpfs at its size) raises SIGBUS instead of ENOSPC:
 * the capacity is allocated (posix_fallocate) when a file is made, so a
 * full disk is an error then, handled as a failed write was (the state
 * file is logged as no longer kept, powerfs serves on without it).  Not
 * quite on a copy-on-write file system (btrfs, ZFS): a page rewritten
 * after its writeback needs a new block, which the allocation did not
 * promise, so a full disk there can still end powerfs with SIGBUS; its
 * keeper then starts a new server, which restores the log, and whose new
 * file fails at its allocation if the disk is still full.  A store past
 * the end of a file someone truncated raises SIGBUS too: the file is
 * powerfs's own, 0600 (in /run/powerfs, 0700, when the keeper picks it; a
 * --state-file path is the administrator's choice), powerfs itself never
 * truncates a file it maps (a snapshot is made with O_EXCL, and the
 * mapping is dropped before the end trims the padding), and anyone who
 * can truncate it could as well rewrite the locks in it: no SIGBUS
 * handler.
 *
 * Times are those of the monotonic clock, which goes on across a restart
 * within a boot: a lock held since 5 s before a crash has been held for 5 s
 * when its new powerfs starts, and a timeout whose deadline passed meanwhile
 * expires at once.  Restoring, every field is checked: a line with a value
 * out of range is dropped (and counted), the rest is restored.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "powerfs/engine/text.h"
#include "powerfs/records/state-file.h"

#define FORMAT 2
#define COMPACT_FACTOR 4
/* A lock+unlock pair adds two lock lines and a counts line, a few hundred
 * bytes.  The file is compacted (a new file, its blocks, a rename) when
 * the log outgrows COMPACT_FACTOR times the state and at least
 * COMPACT_MIN: large enough that compactions stay rare under churn
 * (scripts/bench-state-file weighs it). */
#define COMPACT_MIN (256 * 1024)
/* A name comes from one write: at most a page. */
#define NAME_MAX_BYTES 4096

struct state_file {
	char *path;
	char *tmp_path;
	struct power *pw;
	struct pf_owners *owners; /* may be NULL */
	char boot_id[64];
	int fd;		 /* the log; -1 once broken */
	char *map;	 /* the log, mapped shared: capacity bytes */
	gsize capacity;	 /* the file's size, padding included */
	gsize log_bytes; /* its lines: the padding starts there */
	/* The sources that changed since the last flush: the first in
	 * dirty_one, any others in dirty.  A request changes one source, and
	 * a hash set for it would cost about as much as writing its line. */
	struct wakeup_source *dirty_one;
	GHashTable *dirty;
	gboolean counts_dirty;	/* a source changed: the counters moved */
	gboolean globals_dirty; /* anything else may have changed */
	GHashTable *written;	/* global line's key -> its last line */
	guint counts[3];	/* the last "counts" line's numbers */
	gboolean counts_written;
	GString *out;	  /* lines on their way to the file */
	GSource *flusher; /* writes them before the loop sleeps */
};

/* --- lines ---------------------------------------------------------------- */

/* Appends prefix, then name as hex digits (a name may hold any byte). */
static void append_hex(GString *out, const char *prefix, const char *name)
{
	static const char digits[] = "0123456789abcdef";
	gsize plen = strlen(prefix), len = strlen(name), at = out->len;
	char *p;

	/* By hand: a printf per byte cost microseconds per request. */
	g_string_set_size(out, at + plen + 2 * len);
	p = out->str + at;
	memcpy(p, prefix, plen);
	p += plen;
	for (gsize i = 0; i < len; i++) {
		guchar c = (guchar)name[i];

		*p++ = digits[c >> 4];
		*p++ = digits[c & 0xf];
	}
}

/* " N" or " -N" at p (text.h); returns the end. */
static char *put_u64(char *p, guint64 v)
{
	*p++ = ' ';
	return pf_put_u64(p, v);
}

static char *put_i64(char *p, gint64 v)
{
	*p++ = ' ';
	return pf_put_i64(p, v);
}

/* Room for twelve numbers with their spaces, and the newline. */
#define RECORD_MAX (12 * (1 + PF_DECIMAL_MAX) + 1)

static void append_record(GString *out, const struct wakeup_record *r)
{
	const guint64 counts[] = { r->active_count, r->event_count,
				   r->relax_count, r->wakeup_count,
				   r->expire_count };
	const gint64 times[] = { r->total_time,		r->max_time,
				 r->last_time,		r->start_prevent_time,
				 r->prevent_sleep_time, r->expires };
	char line[RECORD_MAX], *p = line;

	/* Built on the stack, appended at once: one GString call a line. */
	p = put_i64(p, r->active);
	for (guint i = 0; i < G_N_ELEMENTS(counts); i++)
		p = put_u64(p, counts[i]);
	for (guint i = 0; i < G_N_ELEMENTS(times); i++)
		p = put_i64(p, times[i]);
	*p++ = '\n';
	pf_string_append_len(out, line, p - line);
}

static void append_source(struct state_file *sf, const struct wakeup_source *ws)
{
	struct power *pw = sf->pw;
	const char *name = wakeup_source_name(ws);
	struct wakeup_record r;

	if (ws == wakeup_deleted_source(pw->engine)) {
		pf_string_append(sf->out, "source deleted");
	} else if (ws == autosleep_source(pw->autosleep)) {
		pf_string_append(sf->out, "source autosleep");
	} else if (wakelocks_lookup(pw->wakelocks, name, strlen(name)) == ws) {
		append_hex(sf->out, "lock ", name);
	} else {
		/* A source of the backend's (alarmtimer): it is no lock, and
		 * is registered again when it next wakes the system. */
		return;
	}
	wakeup_source_save(ws, &r);
	append_record(sf->out, &r);
}

/* A global line (counts, autosleep, stats, one per owner) is appended only
 * when it differs from the last one written for its key: a lock/unlock
 * pair moves the counters, not the twenty owners. */
static void append_if_changed(struct state_file *sf, char *key, char *line)
{
	const char *last = g_hash_table_lookup(sf->written, key);

	if (!g_strcmp0(last, line)) {
		g_free(key);
		g_free(line);
		return;
	}
	pf_string_append(sf->out, line);
	g_hash_table_replace(sf->written, key, line);
}

static void append_owner(const char *path, mode_t mode, uid_t uid, gid_t gid,
			 gpointer data)
{
	append_if_changed(
		data, g_strconcat("owner ", path, NULL),
		g_strdup_printf("owner %s %04o %u %u\n", path, mode, uid, gid));
}

/* The counters and the handshake move with most locks and unlocks: their
 * line is made by hand, when they moved, and compared as numbers, not in
 * the table of the other global lines (no printf, no allocation). */
static void append_counts(struct state_file *sf)
{
	char line[6 + 3 * (1 + PF_DECIMAL_MAX) + 1], *p = line;
	gboolean armed;
	guint now[3];

	wakeup_get_count(sf->pw->engine, &now[0]);
	now[2] = wakeup_get_handshake(sf->pw->engine, &armed);
	now[1] = armed ? 1 : 0;
	if (sf->counts_written && !memcmp(now, sf->counts, sizeof(now)))
		return;
	memcpy(sf->counts, now, sizeof(now));
	sf->counts_written = TRUE;
	memcpy(p, "counts", 6);
	p = put_u64(p + 6, now[0]);
	p = put_u64(p, now[1]);
	p = put_u64(p, now[2]);
	*p++ = '\n';
	pf_string_append_len(sf->out, line, p - line);
}

/* The settings of kernel/power/main.c this instance keeps. */
static void append_settings(struct state_file *sf)
{
	const struct pm_settings *set = suspend_settings(sf->pw->suspend);

	append_if_changed(sf, g_strdup("settings"),
			  g_strdup_printf("settings %s %d %d %d %d %u %s\n",
					  mem_sleep_label(set->mem_sleep),
					  set->sync_on_suspend, set->pm_async,
					  set->pm_print_times,
					  set->pm_debug_messages,
					  set->freeze_timeout_ms,
					  pm_test_label(set->test_level)));
}

/* The last attempt's times and reasons, the text in hex ("-": none). */
static void append_reasons(struct state_file *sf)
{
	g_autoptr(GString) shown = g_string_new(NULL);
	GString *line = g_string_new(NULL);
	gint64 awake, asleep;

	wakeup_reason_get_times(sf->pw->reasons, &awake, &asleep);
	wakeup_reason_show_resume(sf->pw->reasons, shown);
	g_string_printf(line, "reasons %" G_GINT64_FORMAT " %" G_GINT64_FORMAT,
			awake, asleep);
	if (shown->len)
		append_hex(line, " ", shown->str);
	else
		g_string_append(line, " -");
	g_string_append_c(line, '\n');
	append_if_changed(sf, g_strdup("reasons"), g_string_free(line, FALSE));
}

static void append_globals(struct state_file *sf)
{
	struct power *pw = sf->pw;
	const struct suspend_stats *st = suspend_get_stats(pw->suspend);
	enum pm_state as = autosleep_state(pw->autosleep);

	append_counts(sf);
	append_if_changed(
		sf, g_strdup("autosleep"),
		g_strdup_printf("autosleep %s\n",
				as == PM_ON ? "off" : pm_state_label(as)));
	append_if_changed(
		sf, g_strdup("stats"),
		g_strdup_printf(
			"stats %d %d %d %d %d %d %d %d %d %d %d %s\n",
			st->success, st->fail, st->failed_freeze,
			st->failed_prepare, st->failed_suspend,
			st->failed_suspend_late, st->failed_suspend_noirq,
			st->failed_resume, st->failed_resume_early,
			st->failed_resume_noirq, st->last_failed_errno,
			*st->last_failed_step ? st->last_failed_step : "-"));
	append_settings(sf);
	append_reasons(sf);
	if (sf->owners)
		pf_owners_foreach(sf->owners, append_owner, sf);
}

/* --- writing -------------------------------------------------------------- */

/* The file no longer in use (broken, or replaced, or the end). */
static void let_go(struct state_file *sf)
{
	if (sf->map)
		munmap(sf->map, sf->capacity);
	sf->map = NULL;
	if (sf->fd >= 0)
		close(sf->fd);
	sf->fd = -1;
}

static void broken(struct state_file *sf, const char *what, int err)
{
	g_warning("state file %s: %s: %s; no longer kept", sf->path, what,
		  g_strerror(err));
	let_go(sf);
}

static void visit_lock(const struct wakeup_source *ws, gpointer data)
{
	append_source(data, ws);
}

/* Room for the snapshot and the lines that follow it, whole pages. */
static gsize capacity_for(gsize snapshot)
{
	gsize page = (gsize)sysconf(_SC_PAGESIZE);

	return (MAX(COMPACT_MIN, COMPACT_FACTOR * snapshot) + page - 1) / page *
	       page;
}

/* A file holding the whole state: the header, then every object once (the
 * locks in the order they were created, as they are to be restored),
 * made at its capacity and mapped, then renamed over the log. */
static void compact(struct state_file *sf)
{
	struct power *pw = sf->pw;
	const char *what = "creating";
	gsize capacity;
	char *map = MAP_FAILED;
	int fd, err;

	g_string_truncate(sf->out, 0);
	g_string_append_printf(sf->out, "powerfs-state %d %s\n", FORMAT,
			       sf->boot_id);
	g_hash_table_remove_all(sf->written);
	sf->counts_written = FALSE;
	append_globals(sf);
	append_source(sf, autosleep_source(pw->autosleep));
	append_source(sf, wakeup_deleted_source(pw->engine));
	wakelocks_foreach(pw->wakelocks, visit_lock, sf);
	sf->dirty_one = NULL;
	g_hash_table_remove_all(sf->dirty);
	sf->counts_dirty = sf->globals_dirty = FALSE;
	capacity = capacity_for(sf->out->len);

	/* Never O_TRUNC: a file powerfs maps is never cut short under a
	 * mapping, not even a snapshot another powerfs left half made. */
	unlink(sf->tmp_path);
	fd = open(sf->tmp_path,
		  O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	/* The blocks now: a full disk is ENOSPC here, not SIGBUS later. */
	what = "allocating";
	err = posix_fallocate(fd, 0, (off_t)capacity);
	if (err) {
		errno = err;
		goto fail;
	}
	what = "mapping";
	map = mmap(NULL, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto fail;
	memcpy(map, sf->out->str, sf->out->len);
	what = "renaming";
	if (rename(sf->tmp_path, sf->path) < 0)
		goto fail;
	/* The old log is gone from its name: its mapping goes with it. */
	let_go(sf);
	sf->fd = fd;
	sf->map = map;
	sf->capacity = capacity;
	sf->log_bytes = sf->out->len;
	g_string_truncate(sf->out, 0);
	return;

fail:
	err = errno;
	if (map != MAP_FAILED)
		munmap(map, capacity);
	if (fd >= 0)
		close(fd);
	unlink(sf->tmp_path);
	g_string_truncate(sf->out, 0);
	broken(sf, what, err);
}

void state_file_flush(struct state_file *sf)
{
	GHashTableIter it;
	gpointer ws;

	if (!sf || !sf->map)
		return;
	if (!sf->dirty_one && !g_hash_table_size(sf->dirty) &&
	    !sf->counts_dirty && !sf->globals_dirty && !sf->out->len)
		return;
	if (sf->dirty_one)
		append_source(sf, sf->dirty_one);
	sf->dirty_one = NULL;
	if (g_hash_table_size(sf->dirty)) {
		g_hash_table_iter_init(&it, sf->dirty);
		while (g_hash_table_iter_next(&it, &ws, NULL))
			append_source(sf, ws);
		g_hash_table_remove_all(sf->dirty);
	}
	if (sf->globals_dirty)
		append_globals(sf);
	else if (sf->counts_dirty)
		append_counts(sf);
	sf->counts_dirty = sf->globals_dirty = FALSE;
	/* Full: a snapshot of everything instead, in a file sized for it. */
	if (sf->out->len > sf->capacity - sf->log_bytes) {
		compact(sf);
		return;
	}
	memcpy(sf->map + sf->log_bytes, sf->out->str, sf->out->len);
	sf->log_bytes += sf->out->len;
	g_string_truncate(sf->out, 0);
}

static void changed(struct pf_event *ev, gpointer data)
{
	struct state_file *sf = data;
	struct wakeup_source *ws = ev->source;

	if (!sf->map)
		return;
	if (!ws) {
		sf->globals_dirty = TRUE;
		return;
	}
	/* Every source change moves the counters too. */
	sf->counts_dirty = TRUE;
	if (!wakeup_source_unregistering(ws)) {
		if (!sf->dirty_one || sf->dirty_one == ws)
			sf->dirty_one = ws;
		else
			g_hash_table_add(sf->dirty, ws);
		return;
	}
	/* A collected lock: said now, while its name is there. */
	if (sf->dirty_one == ws)
		sf->dirty_one = NULL;
	else
		g_hash_table_remove(sf->dirty, ws);
	append_hex(sf->out, "gone ", wakeup_source_name(ws));
	g_string_append_c(sf->out, '\n');
}

/* A GSource that never dispatches: its prepare() runs before each time the
 * main loop would sleep, and writes what the loop's own work changed. */
struct flusher {
	GSource source;
	struct state_file *sf;
};

static gboolean flusher_prepare(GSource *source, gint *timeout)
{
	*timeout = -1;
	state_file_flush(((struct flusher *)source)->sf);
	return FALSE;
}

static GSourceFuncs flusher_funcs = { .prepare = flusher_prepare };

/* --- reading -------------------------------------------------------------- */

struct saved_lock {
	char *name;
	struct wakeup_record rec;
	guint64 first_line; /* since it was last gone: its creation */
	guint64 line;	    /* of its last record: its last use */
};

static void saved_lock_free(gpointer p)
{
	struct saved_lock *l = p;

	g_free(l->name);
	g_free(l);
}

struct saved {
	gboolean have_counts, have_stats, have_settings, have_reasons;
	struct pm_settings settings;
	gint64 awake_ns, asleep_ns;
	char *shown; /* last_resume_reason's text */
	guint registered, saved;
	gboolean armed;
	enum pm_state autosleep;
	struct suspend_stats stats;
	char step[32];
	struct wakeup_record autosleep_rec, deleted_rec;
	gboolean have_autosleep_rec, have_deleted_rec;
	GHashTable *locks;  /* name -> struct saved_lock */
	GHashTable *owners; /* path -> "mode uid gid" */
	guint dropped;	    /* lines with a value out of range */
};

static gboolean to_u64(const char *s, guint64 max, guint64 *out)
{
	return s && g_ascii_string_to_unsigned(s, 10, 0, max, out, NULL);
}

static gboolean to_i64(const char *s, gint64 min, gint64 max, gint64 *out)
{
	return s && g_ascii_string_to_signed(s, 10, min, max, out, NULL);
}

/* Hex text, 1 to max bytes, no NUL. */
static char *text_from_hex(const char *hex, gsize max)
{
	gsize n = hex ? strlen(hex) : 0;
	char *name;

	if (n == 0 || n % 2 || n / 2 > max)
		return NULL;
	name = g_malloc(n / 2 + 1);
	for (gsize i = 0; i < n / 2; i++) {
		int hi = g_ascii_xdigit_value(hex[2 * i]);
		int lo = g_ascii_xdigit_value(hex[2 * i + 1]);

		if (hi < 0 || lo < 0 || (hi | lo) == 0) {
			g_free(name);
			return NULL;
		}
		name[i] = (char)(hi << 4 | lo);
	}
	name[n / 2] = '\0';
	return name;
}

/* A source's fields, each within what this boot's clock allows: times are
 * never past now (a deadline at most 2^32 ms ahead), durations never
 * longer than the time since boot. */
static gboolean parse_record(char **f, gint64 now, struct wakeup_record *r)
{
	guint64 u[6];
	gint64 t[6];

	for (int i = 0; i < 6; i++)
		if (!to_u64(f[i], i == 0 ? 1 : G_MAXULONG, &u[i]))
			return FALSE;
	for (int i = 0; i < 6; i++)
		if (!to_i64(f[6 + i], 0,
			    i == 5 ? now + (gint64)G_MAXUINT32 * 1000 : now,
			    &t[i]))
			return FALSE;
	if (f[12] || t[1] > t[0]) /* max_time <= total_time */
		return FALSE;
	*r = (struct wakeup_record){
		.active = u[0],
		.active_count = u[1],
		.event_count = u[2],
		.relax_count = u[3],
		.wakeup_count = u[4],
		.expire_count = u[5],
		.total_time = t[0],
		.max_time = t[1],
		.last_time = t[2],
		.start_prevent_time = t[3],
		.prevent_sleep_time = t[4],
		.expires = t[5],
	};
	return TRUE;
}

/* A wake lock's name: 1 to NAME_MAX_BYTES bytes in hex. */
static char *name_from_hex(const char *hex)
{
	return text_from_hex(hex, NAME_MAX_BYTES);
}

static enum pm_state state_from_label(const char *s)
{
	for (enum pm_state st = PM_FREEZE; st < PM_NR_STATES; st++)
		if (!g_strcmp0(s, pm_state_label(st)))
			return st;
	return PM_ON;
}

static gboolean parse_flag(const char *s, gboolean *out)
{
	guint64 v;

	if (!to_u64(s, 1, &v))
		return FALSE;
	*out = v == 1;
	return TRUE;
}

/* "settings MEM_SLEEP SYNC ASYNC PRINT_TIMES DEBUG TIMEOUT TEST". */
static gboolean parse_settings(char **f, struct saved *sv)
{
	struct pm_settings *set = &sv->settings;
	guint64 timeout;
	guint i;

	if (g_strv_length(f) != 7)
		return FALSE;
	set->mem_sleep = PM_ON;
	for (enum pm_state m = PM_FREEZE; m <= PM_MEM; m++)
		if (!g_strcmp0(f[0], mem_sleep_label(m)))
			set->mem_sleep = m;
	for (i = 0; i < PM_TEST_LEVELS; i++)
		if (!g_strcmp0(f[6], pm_test_label(i)))
			break;
	if (set->mem_sleep == PM_ON || i == PM_TEST_LEVELS ||
	    !parse_flag(f[1], &set->sync_on_suspend) ||
	    !parse_flag(f[2], &set->pm_async) ||
	    !parse_flag(f[3], &set->pm_print_times) ||
	    !parse_flag(f[4], &set->pm_debug_messages) ||
	    !to_u64(f[5], G_MAXUINT, &timeout))
		return FALSE;
	set->test_level = i;
	set->freeze_timeout_ms = (guint)timeout;
	return TRUE;
}

/* "reasons AWAKE_NS ASLEEP_NS HEX|-". */
static gboolean parse_reasons(char **f, struct saved *sv)
{
	const gint64 day = G_GINT64_CONSTANT(86400000000000);

	g_clear_pointer(&sv->shown, g_free);
	if (g_strv_length(f) != 3 ||
	    !to_i64(f[0], 0, 10000 * day, &sv->awake_ns) ||
	    !to_i64(f[1], 0, 10000 * day, &sv->asleep_ns))
		return FALSE;
	if (strcmp(f[2], "-")) {
		sv->shown = text_from_hex(f[2], 4095);
		if (!sv->shown)
			return FALSE;
	}
	return TRUE;
}

static gboolean parse_stats(char **f, struct saved *sv)
{
	int *fields[] = {
		&sv->stats.success,
		&sv->stats.fail,
		&sv->stats.failed_freeze,
		&sv->stats.failed_prepare,
		&sv->stats.failed_suspend,
		&sv->stats.failed_suspend_late,
		&sv->stats.failed_suspend_noirq,
		&sv->stats.failed_resume,
		&sv->stats.failed_resume_early,
		&sv->stats.failed_resume_noirq,
		&sv->stats.last_failed_errno,
	};

	for (gsize i = 0; i < G_N_ELEMENTS(fields); i++) {
		gint64 v;

		if (!to_i64(f[i], i == 10 ? -4095 : 0, i == 10 ? 0 : G_MAXINT,
			    &v))
			return FALSE;
		*fields[i] = (int)v;
	}
	if (!f[11] || f[12] || strlen(f[11]) >= sizeof(sv->step))
		return FALSE;
	g_strlcpy(sv->step, strcmp(f[11], "-") ? f[11] : "", sizeof(sv->step));
	return TRUE;
}

/* One line of the log; FALSE if a value is out of range (dropped).  One
 * branch per kind of line, in the order the format is described at the top
 * of this file: longer than 80 lines so that the whole grammar reads in one
 * place. */
static gboolean parse_line(struct saved *sv, char *line, guint64 lineno,
			   gint64 now)
{
	g_auto(GStrv) f = g_strsplit(line, " ", -1);
	const char *kind = f[0];

	if (!g_strcmp0(kind, "counts")) {
		guint64 reg, armed, saved;

		if (!to_u64(f[1], G_MAXUINT, &reg) ||
		    !to_u64(f[2], 1, &armed) ||
		    !to_u64(f[3], G_MAXUINT, &saved) || f[4])
			return FALSE;
		sv->have_counts = TRUE;
		sv->registered = reg;
		sv->armed = armed;
		sv->saved = saved;
	} else if (!g_strcmp0(kind, "autosleep")) {
		enum pm_state st = state_from_label(f[1]);

		if ((st == PM_ON && g_strcmp0(f[1], "off")) || f[2])
			return FALSE;
		sv->autosleep = st;
	} else if (!g_strcmp0(kind, "stats")) {
		if (!parse_stats(f + 1, sv))
			return FALSE;
		sv->have_stats = TRUE;
	} else if (!g_strcmp0(kind, "settings")) {
		if (!parse_settings(f + 1, sv))
			return FALSE;
		sv->have_settings = TRUE;
	} else if (!g_strcmp0(kind, "reasons")) {
		sv->have_reasons = parse_reasons(f + 1, sv);
		if (!sv->have_reasons)
			return FALSE;
	} else if (!g_strcmp0(kind, "owner")) {
		guint64 mode, uid, gid;

		if (!f[1] ||
		    !g_ascii_string_to_unsigned(f[2] ? f[2] : "", 8, 0, 07777,
						&mode, NULL) ||
		    !to_u64(f[3], G_MAXUINT32 - 1, &uid) ||
		    !to_u64(f[4], G_MAXUINT32 - 1, &gid) || f[5])
			return FALSE;
		g_hash_table_insert(
			sv->owners, g_strdup(f[1]),
			g_strdup_printf("%s %s %s", f[2], f[3], f[4]));
	} else if (!g_strcmp0(kind, "source") && f[1]) {
		gboolean deleted = !strcmp(f[1], "deleted");
		struct wakeup_record *r =
			deleted ? &sv->deleted_rec : &sv->autosleep_rec;

		if ((!deleted && strcmp(f[1], "autosleep")) ||
		    !parse_record(f + 2, now, r))
			return FALSE;
		*(deleted ? &sv->have_deleted_rec : &sv->have_autosleep_rec) =
			TRUE;
	} else if (!g_strcmp0(kind, "lock")) {
		struct saved_lock *l = g_new0(struct saved_lock, 1);

		struct saved_lock *old;

		l->name = name_from_hex(f[1]);
		l->first_line = l->line = lineno;
		if (!l->name || !parse_record(f + 2, now, &l->rec)) {
			saved_lock_free(l);
			return FALSE;
		}
		old = g_hash_table_lookup(sv->locks, l->name);
		if (old)
			l->first_line = old->first_line;
		g_hash_table_replace(sv->locks, l->name, l);
	} else if (!g_strcmp0(kind, "gone")) {
		g_autofree char *name = name_from_hex(f[1]);

		if (!name || f[2])
			return FALSE;
		g_hash_table_remove(sv->locks, name);
	} else {
		return FALSE;
	}
	return TRUE;
}

static gint by_first_line(gconstpointer a, gconstpointer b)
{
	const struct saved_lock *x = *(struct saved_lock *const *)a;
	const struct saved_lock *y = *(struct saved_lock *const *)b;

	return x->first_line < y->first_line ? -1 :
					       x->first_line > y->first_line;
}

static gint by_line(gconstpointer a, gconstpointer b)
{
	const struct saved_lock *x = *(struct saved_lock *const *)a;
	const struct saved_lock *y = *(struct saved_lock *const *)b;

	return x->line < y->line ? -1 : x->line > y->line;
}

static void restore_owners(struct state_file *sf, struct saved *sv)
{
	GHashTableIter it;
	gpointer path, value;

	if (!sf->owners)
		return;
	g_hash_table_iter_init(&it, sv->owners);
	while (g_hash_table_iter_next(&it, &path, &value)) {
		guint mode, uid, gid;

		if (sscanf(value, "%o %u %u", &mode, &uid, &gid) == 3 &&
		    !pf_owners_set(sf->owners, path, mode, uid, gid))
			g_warning("state file: no file %s here",
				  (const char *)path);
	}
}

/* What "mem" means must be one the backend offers now. */
static void restore_settings(struct power *pw, const struct pm_settings *set)
{
	struct pm_settings *now = suspend_settings(pw->suspend);
	enum pm_state mem_sleep = now->mem_sleep;

	*now = *set;
	if (set->mem_sleep != PM_FREEZE && !(suspend_valid_states(pw->suspend) &
					     PM_STATE_BIT(set->mem_sleep))) {
		g_warning("state file: mem_sleep %s is not possible here",
			  mem_sleep_label(set->mem_sleep));
		now->mem_sleep = mem_sleep;
	}
}

static void apply(struct state_file *sf, struct saved *sv)
{
	struct power *pw = sf->pw;
	g_autoptr(GPtrArray) locks = g_ptr_array_new();
	guint held = 0, restored = 0, refused = 0;
	GHashTableIter it;
	gpointer l;

	g_hash_table_iter_init(&it, sv->locks);
	while (g_hash_table_iter_next(&it, NULL, &l))
		g_ptr_array_add(locks, l);

	restore_owners(sf, sv);
	/* The setting first: it decides how the sources count
	 * prevent_suspend_time. */
	if (sv->autosleep != PM_ON) {
		if (suspend_valid_states(pw->suspend) &
		    PM_STATE_BIT(sv->autosleep))
			autosleep_restore_state(pw->autosleep, sv->autosleep);
		else
			g_warning("state file: autosleep %s is not possible "
				  "here",
				  pm_state_label(sv->autosleep));
	}
	if (sv->have_autosleep_rec)
		wakeup_source_load(autosleep_source(pw->autosleep),
				   &sv->autosleep_rec);
	if (sv->have_deleted_rec)
		wakeup_source_load(wakeup_deleted_source(pw->engine),
				   &sv->deleted_rec);
	/* Created in their order (the order wakeup_sources lists them),
	 * then used in the order of their last change: the least recently
	 * used are collected first, as before.  (A snapshot knows only the
	 * first order: after one, the second is the first.) */
	g_ptr_array_sort(locks, by_first_line);
	for (guint i = 0; i < locks->len; i++) {
		struct saved_lock *saved = locks->pdata[i];
		struct wakeup_source *ws =
			wakelocks_restore(pw->wakelocks, saved->name);

		if (!ws) {
			refused++;
			continue;
		}
		wakeup_source_load(ws, &saved->rec);
		restored++;
		held += saved->rec.active;
	}
	g_ptr_array_sort(locks, by_line);
	for (guint i = 0; i < locks->len; i++)
		wakelocks_restore(pw->wakelocks,
				  ((struct saved_lock *)locks->pdata[i])->name);
	if (sv->have_stats) {
		sv->stats.last_failed_step = sv->step;
		suspend_load_stats(pw->suspend, &sv->stats);
	}
	if (sv->have_settings)
		restore_settings(pw, &sv->settings);
	if (sv->have_reasons)
		wakeup_reason_restore(pw->reasons, sv->shown ? sv->shown : "",
				      sv->awake_ns, sv->asleep_ns);
	if (sv->have_counts)
		wakeup_restore_counts(pw->engine, sv->registered, sv->armed,
				      sv->saved);
	g_message("state file %s: restored %u wake locks (%u held), "
		  "autosleep %s, handshake %s; dropped %u lines with a value "
		  "out of range, %u locks over the limit",
		  sf->path, restored, held,
		  sv->autosleep == PM_ON ? "off" :
					   pm_state_label(sv->autosleep),
		  sv->armed ? "armed" : "not armed", sv->dropped, refused);
}

/* The file as it is, in *text, or FALSE (and why).  Not through a symbolic
 * link, and not a FIFO (config.c refuses those at start, but the file may
 * change). */
static gboolean read_log(const char *path, char **contents, gsize *len,
			 GError **error)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	g_autoptr(GString) text = g_string_new(NULL);
	struct stat st;
	char buf[65536];
	gssize n;

	if (fd < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "%s", g_strerror(errno));
		return FALSE;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
			    "not a regular file");
		return FALSE;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		pf_string_append_len(text, buf, n);
	close(fd);
	*len = text->len;
	*contents = g_string_free(g_steal_pointer(&text), FALSE);
	return TRUE;
}

static void restore(struct state_file *sf)
{
	g_autoptr(GError) error = NULL;
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	g_autofree char *header = NULL;
	struct saved sv = { 0 };
	gint64 now = pf_clock_now(sf->pw->clock);
	gsize len = 0;

	if (!read_log(sf->path, &text, &len, &error)) {
		if (g_error_matches(error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
			g_message("state file %s: none yet, starting clean",
				  sf->path);
		else
			g_warning("state file %s unusable, starting clean: %s",
				  sf->path, error->message);
		return;
	}
	/* The log ends at its first NUL byte.  After it comes the padding of
	 * a file made at its capacity, or what a crash interrupted: a
	 * memcpy may store a batch's bytes in any order, but every byte
	 * before the first NUL is the one written there (a line holds no
	 * NUL), and the batch was not acknowledged yet.  A log written by
	 * write(2), before the mapping, has no padding: it ends at its
	 * size. */
	len = strnlen(text, len);
	text[len] = '\0';
	lines = g_strsplit(text, "\n", -1);
	header = g_strdup_printf("powerfs-state %d %s", FORMAT, sf->boot_id);
	if (g_strcmp0(lines[0], header)) {
		g_autofree char *format =
			g_strdup_printf("powerfs-state %d ", FORMAT);

		if (lines[0] && g_str_has_prefix(lines[0], format))
			g_message("state file %s is from another boot: "
				  "starting clean, as the kernel does (no "
				  "lock, setting or statistic kept)",
				  sf->path);
		else
			g_warning("state file %s unusable, starting clean: not "
				  "a powerfs %d state file",
				  sf->path, FORMAT);
		return;
	}
	sv.locks = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
					 saved_lock_free);
	sv.owners =
		g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	/* What follows the last newline is a line a crash cut short: not an
	 * error, and not parsed either (a number cut in its digits would
	 * still parse, as a value nobody wrote). */
	for (guint i = 1; lines[0] && lines[i] && lines[i + 1]; i++)
		if (*lines[i] && !parse_line(&sv, lines[i], i, now))
			sv.dropped++;
	apply(sf, &sv);
	g_hash_table_unref(sv.locks);
	g_hash_table_unref(sv.owners);
	g_free(sv.shown);
}

/* --- life ----------------------------------------------------------------- */

static void read_boot_id(char *out, gsize size)
{
	g_autofree char *text = NULL;

	if (g_file_get_contents("/proc/sys/kernel/random/boot_id", &text, NULL,
				NULL))
		g_strlcpy(out, g_strstrip(text), size);
	else
		g_strlcpy(out, "unknown", size);
}

struct state_file *state_file_open(const char *path, struct power *pw,
				   struct pf_owners *owners)
{
	struct state_file *sf = g_new0(struct state_file, 1);

	sf->path = g_strdup(path);
	sf->tmp_path = g_strconcat(path, ".tmp", NULL);
	sf->pw = pw;
	sf->owners = owners;
	sf->fd = -1;
	sf->dirty = g_hash_table_new(g_direct_hash, g_direct_equal);
	sf->written =
		g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	sf->out = g_string_new(NULL);
	read_boot_id(sf->boot_id, sizeof(sf->boot_id));
	/* A snapshot a crash cut short. */
	unlink(sf->tmp_path);
	restore(sf);
	compact(sf);
	pf_events_subscribe(pw->events, PF_EVENT_BIT(PF_EVENT_CHANGED), changed,
			    sf);
	sf->flusher = g_source_new(&flusher_funcs, sizeof(struct flusher));
	((struct flusher *)sf->flusher)->sf = sf;
	g_source_set_name(sf->flusher, "powerfs state file");
	g_source_attach(sf->flusher, NULL);
	return sf;
}

void state_file_close(struct state_file *sf)
{
	if (!sf)
		return;
	pf_events_unsubscribe(sf->pw->events, changed, sf);
	g_source_destroy(sf->flusher);
	g_source_unref(sf->flusher);
	state_file_flush(sf);
	if (sf->map) {
		munmap(sf->map, sf->capacity);
		sf->map = NULL;
		/* A clean end leaves the lines without their padding, the file
		 * a write(2) log would be.  The mapping is gone first: no
		 * store can land past the new end. */
		if (ftruncate(sf->fd, (off_t)sf->log_bytes) < 0)
			g_warning("state file %s: trimming: %s", sf->path,
				  g_strerror(errno));
	}
	let_go(sf);
	g_hash_table_unref(sf->dirty);
	g_hash_table_unref(sf->written);
	g_string_free(sf->out, TRUE);
	g_free(sf->tmp_path);
	g_free(sf->path);
	g_free(sf);
}
