/* journal.c - the event journal: every wake lock taken, released, expired
 * or collected, the handshake, autosleep, each suspend attempt and the
 * host's other sleeps, as JSON Lines that powerfs-report turns into a
 * timeline, a trace and a summary.
 *
 * Each line is {"t":MONOTONIC_US,"wall":UNIX_US,"ev":NAME,...}.  The
 * monotonic clock stops while the host sleeps and the wall clock does not,
 * which is how the report tells time suspended from time awake.  A source
 * name is arbitrary bytes: when it is not UTF-8, "src" holds it made valid
 * (U+FFFD for what is not) and "src_hex" its bytes, which is what the report
 * keys the source by.
 *
 * Events are recorded from the loop's threads, under the loop lock, so a
 * record must cost little and never wait for a disk: it is formatted into
 * a buffer, and a writer thread of the journal's own writes the buffer out.
 * The writer sleeps on a condition until the first event after a write,
 * then lets events gather for BATCH_US and writes them with one write(2).
 * So an idle powerfs never wakes for its journal, and a busy one writes
 * about BATCH_US apart.  If the disk does not keep up and the buffer
 * reaches MAX_PENDING, events are dropped and counted, and a "lost" event
 * says how many.
 *
 * The file is bounded: a write that would take it past max_bytes renames it
 * to PATH.1 (replacing the previous one) and begins PATH again, always at
 * a line boundary.  A crash can leave the last line torn; the next start
 * ends it with a newline, which the report knows to skip.
 *
 * So whoever makes events fast enough pushes older ones out of both files.
 * Any local user may read wakeup_count (mode 0644), as fast as it likes:
 * the reads it makes must not erase the record of who kept the machine
 * awake.  A count_read line is written while the readers' budget lasts
 * (READ_BURST lines, one more every READ_EVERY_US); past it, reads are
 * coalesced into one count_reads line, written before the next event of
 * any other kind, or after READS_SPAN_US of reads, or at close.  Reads
 * then cost at most one line per other event and a few lines a minute,
 * whatever their rate.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "powerfs/engine/power.h"
#include "powerfs/engine/text.h"
#include "powerfs/records/journal.h"

#define BATCH_US (10 * 1000)
#define MAX_PENDING (4 * 1024 * 1024)
/* Names listed in a failed suspend's active/signalled arrays; the rest are
 * counted as "+N more". */
#define MAX_NAMES 32
/* Callers whose container was looked up, forgotten all at once when full. */
#define MAX_CALLERS 1024
/* How long a lookup is trusted without a look at /proc: a pid is not
 * reused that fast (the kernel hands pids out in increasing order up to
 * pid_max before it wraps). */
#define CALLER_TRUST_US G_USEC_PER_SEC
/* The readers' budget of count_read lines, and the longest a count_reads
 * line gathers reads. */
#define READ_BURST 10
#define READ_EVERY_US (10 * G_USEC_PER_SEC)
#define READS_SPAN_US (60 * G_USEC_PER_SEC)
/* Readers counted by uid in a count_reads line; others are summed. */
#define READS_UIDS 4

/* wakeup_count reads that were not given a line of their own. */
struct reads {
	guint64 n;	  /* 0: none pending */
	gint64 t0, wall0; /* the first one's times */
	gint64 t, wall;	  /* the last one's */
	gint64 flush_at;  /* g_get_monotonic_time() to write them by */
	guint count;	  /* the count the last one returned */
	pid_t pid;	  /* the last one's reader */
	guint nuids;
	struct {
		uid_t uid;
		guint64 n;
	} uids[READS_UIDS];
	guint64 other_uids; /* reads by further uids */
};

/* The start of a suspend attempt, until its end is recorded. */
struct attempt_start {
	gint64 t, wall; /* monotonic, wall; microseconds */
};

struct caller_info {
	guint64 pidns;	 /* inode of /proc/PID/ns/pid */
	GString *fields; /* its ",\"cgroup\":...,\"pidns\":N", made
				 * once: the same in every event */
	gint64 checked;	 /* monotonic time of the last look */
};

struct journal {
	struct power *pw;
	struct pf_clock *clock;
	char *path, *old_path;
	guint64 max_bytes;

	/* Taken by recorders and by the writer; nothing slow under it. */
	GMutex lock;
	GCond wake;	  /* the writer: events, or closing */
	GString *pending; /* lines not yet handed to the writer */
	guint64 lost;	  /* events dropped since the last "lost" */
	gboolean first;	  /* the line being recorded is the first */
	gboolean closing;
	GThread *writer;

	/* Touched by the writer thread only. */
	int fd;
	guint64 size;
	gboolean broken; /* a write failed: said once */

	/* The loop's own (recorders hold the loop lock). */
	GHashTable *callers;	   /* pid -> struct caller_info */
	gint64 handshake_t;	   /* a wakeup_count write armed it, or 0 */
	struct attempt_start own;  /* powerfs's own attempt */
	struct attempt_start host; /* a sleep someone else started */
	gint64 read_tat;	   /* the readers' budget: when it is full again
				 * (a GCRA's theoretical arrival time) */
	struct reads reads;	   /* coalesced, not yet written */
};

/* --- JSON ------------------------------------------------------------- */

/* A JSON string of UTF-8 text: quotes, backslashes and control characters
 * escaped; everything else, including non-ASCII, as it is. */
static void append_json_string(GString *out, const char *s, gsize len)
{
	static const char hex[] = "0123456789abcdef";
	const char *run = s;

	g_string_append_c(out, '"');
	for (const char *p = s; p < s + len; p++) {
		guchar c = (guchar)*p;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		pf_string_append_len(out, run, p - run);
		run = p + 1;
		switch (c) {
		case '"':
			pf_string_append(out, "\\\"");
			break;
		case '\\':
			pf_string_append(out, "\\\\");
			break;
		case '\n':
			pf_string_append(out, "\\n");
			break;
		case '\t':
			pf_string_append(out, "\\t");
			break;
		case '\r':
			pf_string_append(out, "\\r");
			break;
		default:
			pf_string_append(out, "\\u00");
			g_string_append_c(out, hex[c >> 4]);
			g_string_append_c(out, hex[c & 0xf]);
		}
	}
	pf_string_append_len(out, run, s + len - run);
	g_string_append_c(out, '"');
}

/* A name of arbitrary bytes as a JSON string: if it is not UTF-8, its
 * valid form (U+FFFD for what is not) and, when hex_field is set, its bytes
 * in hexadecimal as that field. */
static void append_name(GString *out, const char *name, gsize len,
			const char *hex_field)
{
	static const char hex[] = "0123456789abcdef";
	g_autofree char *valid = NULL;

	if (g_utf8_validate_len(name, len, NULL)) {
		append_json_string(out, name, len);
		return;
	}
	valid = g_utf8_make_valid(name, len);
	append_json_string(out, valid, strlen(valid));
	if (!hex_field)
		return;
	g_string_append_printf(out, ",\"%s\":\"", hex_field);
	for (gsize i = 0; i < len; i++) {
		g_string_append_c(out, hex[(guchar)name[i] >> 4]);
		g_string_append_c(out, hex[(guchar)name[i] & 0xf]);
	}
	g_string_append_c(out, '"');
}

/* prefix (a short constant such as ",\"pid\":"), then a number: by hand
 * (text.h), as these go into every lock and unlock event. */
static void append_number(GString *out, const char *prefix, gboolean negative,
			  guint64 v)
{
	char buf[32 + PF_DECIMAL_MAX], *p = buf;
	gsize len = strlen(prefix);

	g_assert(len <= 32);
	memcpy(p, prefix, len);
	p = pf_put_decimal(p + len, negative, v);
	pf_string_append_len(out, buf, p - buf);
}

static void append_u64(GString *out, const char *prefix, guint64 v)
{
	append_number(out, prefix, FALSE, v);
}

static void append_i64(GString *out, const char *prefix, gint64 v)
{
	append_number(out, prefix, v < 0, v < 0 ? -(guint64)v : (guint64)v);
}

static void append_bool(GString *out, const char *prefix, gboolean v)
{
	pf_string_append(out, prefix);
	pf_string_append(out, v ? "true" : "false");
}

static void append_src(GString *out, const char *name, gsize len)
{
	pf_string_append(out, ",\"src\":");
	append_name(out, name, len, "src_hex");
}

static void append_line_start(GString *out, const char *ev, gint64 t,
			      gint64 wall)
{
	append_i64(out, "{\"t\":", t);
	append_i64(out, ",\"wall\":", wall);
	pf_string_append(out, ",\"ev\":\"");
	pf_string_append(out, ev);
	g_string_append_c(out, '"');
}

/* The coalesced reads as one count_reads line, with j->lock taken. */
static void append_reads(struct journal *j)
{
	struct reads *r = &j->reads;
	GString *out = j->pending;

	if (!r->n)
		return;
	append_line_start(out, "count_reads", r->t, r->wall);
	append_u64(out, ",\"n\":", r->n);
	append_i64(out, ",\"since\":", r->t0);
	append_i64(out, ",\"since_wall\":", r->wall0);
	append_u64(out, ",\"count\":", r->count);
	append_i64(out, ",\"pid\":", r->pid);
	pf_string_append(out, ",\"uids\":{");
	for (guint i = 0; i < r->nuids; i++) {
		append_u64(out, i ? ",\"" : "\"", r->uids[i].uid);
		append_u64(out, "\":", r->uids[i].n);
	}
	g_string_append_c(out, '}');
	if (r->other_uids)
		append_u64(out, ",\"other_uids\":", r->other_uids);
	pf_string_append(out, "}\n");
	memset(r, 0, sizeof(*r));
}

/* --- the writer thread ------------------------------------------------- */

static void say_broken(struct journal *j, const char *what, int err)
{
	if (j->broken)
		return;
	j->broken = TRUE;
	g_warning("journal %s: %s: %s (events are dropped until a write "
		  "succeeds)",
		  j->path, what, g_strerror(err));
}

static gboolean write_all(struct journal *j, const char *buf, gsize len)
{
	while (len) {
		ssize_t n = write(j->fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			say_broken(j, "write", errno);
			return FALSE;
		}
		buf += n;
		len -= n;
		j->size += n;
	}
	if (j->broken)
		g_message("journal %s: writing again", j->path);
	j->broken = FALSE;
	return TRUE;
}

static int open_journal_file(const char *path, int extra_flags)
{
	/* Read too: the last byte, for a torn line. */
	return open(path,
		    O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
			    extra_flags,
		    0600);
}

/* PATH becomes PATH.1 and a new PATH begins. */
static void rotate(struct journal *j)
{
	int fd;

	if (rename(j->path, j->old_path) < 0) {
		say_broken(j, "rotating", errno);
		return;
	}
	fd = open_journal_file(j->path, O_TRUNC);
	if (fd < 0) {
		say_broken(j, "opening after rotating", errno);
		return;
	}
	close(j->fd);
	j->fd = fd;
	j->size = 0;
}

/* Whole lines, rotating before a line that would not fit. */
static void write_lines(struct journal *j, const char *buf, gsize len)
{
	while (len) {
		gsize room =
			j->size < j->max_bytes ? j->max_bytes - j->size : 0;
		gsize n = len;

		if (len > room) {
			/* The lines that fit, then a new file. */
			const char *nl = room ? memrchr(buf, '\n', room) : NULL;

			if (!nl && j->size == 0) /* a line longer than */
				nl = memchr(buf, '\n', len); /* a file */
			if (!nl) {
				rotate(j);
				if (j->size) /* could not rotate */
					n = len;
				else
					continue;
			} else {
				n = nl + 1 - buf;
			}
		}
		if (!write_all(j, buf, n))
			return;
		buf += n;
		len -= n;
	}
}

static gpointer writer_main(gpointer data)
{
	struct journal *j = data;
	GString *out = g_string_sized_new(64 * 1024);

	g_mutex_lock(&j->lock);
	for (;;) {
		gint64 until;

		while (!j->pending->len && !j->closing) {
			if (!j->reads.n)
				g_cond_wait(&j->wake, &j->lock);
			else if (!g_cond_wait_until(&j->wake, &j->lock,
						    j->reads.flush_at))
				append_reads(j); /* they are due */
		}
		if (!j->pending->len && j->closing)
			break;
		/* Let a burst gather into one write. */
		until = g_get_monotonic_time() + BATCH_US;
		while (!j->closing &&
		       g_cond_wait_until(&j->wake, &j->lock, until))
			;
		/* Swap buffers: recorders go on into the empty one. */
		{
			GString *t = j->pending;

			j->pending = out;
			out = t;
		}
		g_mutex_unlock(&j->lock);

		write_lines(j, out->str, out->len);
		g_string_truncate(out, 0);

		g_mutex_lock(&j->lock);
	}
	g_mutex_unlock(&j->lock);
	g_string_free(out, TRUE);
	return NULL;
}

/* --- recording ---------------------------------------------------------- */

/* Begins a line at times t, wall in j->pending, with j->lock taken; NULL
 * (and nothing taken) without a journal.  record_end() finishes it.
 * Coalesced reads are written first, unless this is a read. */
static GString *record_begin_at(struct journal *j, const char *ev, gint64 t,
				gint64 wall)
{
	if (!j)
		return NULL;
	g_mutex_lock(&j->lock);
	if (j->pending->len >= MAX_PENDING) {
		j->lost++;
		g_mutex_unlock(&j->lock);
		return NULL;
	}
	j->first = j->pending->len == 0;
	if (strcmp(ev, "count_read") != 0)
		append_reads(j);
	if (j->lost) {
		g_string_append_printf(
			j->pending,
			"{\"t\":%" G_GINT64_FORMAT ",\"wall\":%" G_GINT64_FORMAT
			",\"ev\":\"lost\",\"count\":%" G_GUINT64_FORMAT "}\n",
			t, wall, j->lost);
		j->lost = 0;
	}
	append_line_start(j->pending, ev, t, wall);
	return j->pending;
}

static GString *record_begin(struct journal *j, const char *ev)
{
	if (!j)
		return NULL;
	return record_begin_at(j, ev, pf_clock_now(j->clock),
			       g_get_real_time());
}

static void record_end(struct journal *j)
{
	gboolean first = j->first;

	pf_string_append(j->pending, "}\n");
	g_mutex_unlock(&j->lock);
	/* Only the first event after a write wakes the writer. */
	if (first)
		g_cond_signal(&j->wake);
}

/* The writer's container as powerfs sees it: its pid namespace (the
 * inode of /proc/PID/ns/pid) and its cgroup (the v2 path, or the first
 * hierarchy's).  Looked up once per pid; after CALLER_TRUST_US a stat()
 * checks the namespace again, so a pid reused in another pid namespace is
 * noticed.  A busy writer costs no system call per event. */
static const struct caller_info *caller_info(struct journal *j, pid_t pid)
{
	char path[64];
	struct caller_info *ci;
	struct stat st;
	gint64 now = g_get_monotonic_time();
	g_autofree char *text = NULL;

	ci = g_hash_table_lookup(j->callers, GINT_TO_POINTER(pid));
	if (ci && now - ci->checked < CALLER_TRUST_US)
		return ci;
	g_snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	if (stat(path, &st) < 0)
		return NULL;
	if (ci && ci->pidns == (guint64)st.st_ino) {
		ci->checked = now;
		return ci;
	}
	if (g_hash_table_size(j->callers) >= MAX_CALLERS)
		g_hash_table_remove_all(j->callers);
	ci = g_new0(struct caller_info, 1);
	ci->pidns = st.st_ino;
	ci->checked = now;
	ci->fields = g_string_new(NULL);
	g_snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (g_file_get_contents(path, &text, NULL, NULL)) {
		char *line = text, *v2 = NULL, *first = NULL;

		/* "0::/path" (v2), or "N:controllers:/path" (v1). */
		for (char *nl; line && *line; line = nl ? nl + 1 : NULL) {
			char *p = strchr(line, ':');

			nl = strchr(line, '\n');
			if (nl)
				*nl = '\0';
			if (p && (p = strchr(p + 1, ':'))) {
				if (g_str_has_prefix(line, "0::"))
					v2 = p + 1;
				else if (!first)
					first = p + 1;
			}
		}
		if (v2 || first) {
			const char *cgroup = v2 ? v2 : first;

			pf_string_append(ci->fields, ",\"cgroup\":");
			append_name(ci->fields, cgroup, strlen(cgroup), NULL);
		}
	}
	append_u64(ci->fields, ",\"pidns\":", ci->pidns);
	g_hash_table_replace(j->callers, GINT_TO_POINTER(pid), ci);
	return ci;
}

static void append_caller(struct journal *j, GString *out, pid_t pid, uid_t uid)
{
	const struct caller_info *ci = pid > 0 ? caller_info(j, pid) : NULL;

	append_i64(out, ",\"pid\":", pid);
	append_u64(out, ",\"uid\":", uid);
	if (ci)
		pf_string_append_len(out, ci->fields->str, ci->fields->len);
}

static void caller_info_free(gpointer data)
{
	struct caller_info *ci = data;

	g_string_free(ci->fields, TRUE);
	g_free(ci);
}

void journal_start(struct journal *j, const char *backend, guint states)
{
	g_autofree char *boot_id = NULL;
	GString *out;
	guint n = 0;

	if (!j)
		return;
	if (!g_file_get_contents("/proc/sys/kernel/random/boot_id", &boot_id,
				 NULL, NULL))
		boot_id = g_strdup("unknown");
	g_strstrip(boot_id);
	out = record_begin(j, "start");
	if (!out)
		return;
	g_string_append_printf(
		out, ",\"version\":\"%s\",\"boot_id\":", POWERFS_VERSION);
	append_json_string(out, boot_id, strlen(boot_id));
	pf_string_append(out, ",\"backend\":");
	append_json_string(out, backend, strlen(backend));
	pf_string_append(out, ",\"states\":\"");
	for (enum pm_state s = PM_FREEZE; s < PM_NR_STATES; s++)
		if (states & PM_STATE_BIT(s))
			g_string_append_printf(out, "%s%s", n++ ? " " : "",
					       pm_state_label(s));
	g_string_append_c(out, '"');
	record_end(j);
}

void journal_stop(struct journal *j)
{
	if (record_begin(j, "stop"))
		record_end(j);
}

static void record_lock(struct journal *j, const char *name, gsize len,
			guint32 timeout_ms, gboolean created,
			gboolean was_active, pid_t pid, uid_t uid)
{
	GString *out = record_begin(j, "lock");

	if (!out)
		return;
	append_src(out, name, len);
	append_u64(out, ",\"timeout_ms\":", timeout_ms);
	append_bool(out, ",\"created\":", created);
	append_bool(out, ",\"was_active\":", was_active);
	append_caller(j, out, pid, uid);
	record_end(j);
}

static void record_unlock(struct journal *j, const char *name, gsize len,
			  gboolean was_active, pid_t pid, uid_t uid)
{
	GString *out = record_begin(j, "unlock");

	if (!out)
		return;
	append_src(out, name, len);
	append_bool(out, ",\"was_active\":", was_active);
	append_caller(j, out, pid, uid);
	record_end(j);
}

static void record_source(struct journal *j, const char *ev, const char *name)
{
	GString *out = record_begin(j, ev);

	if (!out)
		return;
	append_src(out, name, strlen(name));
	record_end(j);
}

/* Gives the read a count_read line if the readers' budget has one and no
 * reads are being coalesced (their line comes first); else counts it in
 * j->reads.  With j->lock taken.  *wake: the writer must learn that reads
 * began to gather (it writes them out after READS_SPAN_US). */
static gboolean read_gets_a_line(struct journal *j, guint count, pid_t pid,
				 uid_t uid, gint64 t, gint64 wall,
				 gboolean *wake)
{
	struct reads *r = &j->reads;
	guint i;

	if (!r->n && t >= j->read_tat - (READ_BURST - 1) * READ_EVERY_US) {
		j->read_tat = MAX(j->read_tat, t) + READ_EVERY_US;
		return TRUE;
	}
	if (!r->n++) {
		r->t0 = t;
		r->wall0 = wall;
		r->flush_at = g_get_monotonic_time() + READS_SPAN_US;
		*wake = TRUE;
	}
	r->t = t;
	r->wall = wall;
	r->count = count;
	r->pid = pid;
	for (i = 0; i < r->nuids && r->uids[i].uid != uid; i++)
		;
	if (i < r->nuids) {
		r->uids[i].n++;
	} else if (i < READS_UIDS) {
		r->uids[i].uid = uid;
		r->uids[i].n = 1;
		r->nuids++;
	} else {
		r->other_uids++;
	}
	return FALSE;
}

static void record_count_read(struct journal *j, guint count, pid_t pid,
			      uid_t uid)
{
	gboolean line, wake = FALSE;
	gint64 t, wall;
	GString *out;

	t = pf_clock_now(j->clock);
	wall = g_get_real_time();
	g_mutex_lock(&j->lock);
	line = read_gets_a_line(j, count, pid, uid, t, wall, &wake);
	g_mutex_unlock(&j->lock);
	if (wake)
		g_cond_signal(&j->wake);
	if (!line)
		return;
	out = record_begin_at(j, "count_read", t, wall);
	if (!out)
		return;
	g_string_append_printf(out, ",\"count\":%u", count);
	append_caller(j, out, pid, uid);
	record_end(j);
}

static void record_count_write(struct journal *j, gboolean parsed, guint count,
			       int result, pid_t pid, uid_t uid)
{
	GString *out;

	/* What a failed suspend's "signalled" counts from. */
	j->handshake_t = result ? 0 : pf_clock_now(j->clock);
	out = record_begin(j, "count_write");
	if (!out)
		return;
	if (parsed)
		g_string_append_printf(out, ",\"count\":%u", count);
	g_string_append_printf(out, ",\"result\":%d", result);
	append_caller(j, out, pid, uid);
	record_end(j);
}

/* pid < 0: no writer (the setting restored at start). */
static void record_autosleep(struct journal *j, const char *state, pid_t pid,
			     uid_t uid)
{
	GString *out = record_begin(j, "autosleep");

	if (!out)
		return;
	g_string_append_printf(out, ",\"state\":\"%s\"", state);
	if (pid >= 0)
		append_caller(j, out, pid, uid);
	record_end(j);
}

/* The names of a failed attempt's sources: active now, or signalled (an
 * activation or a deactivation) since `since`. */
struct name_list {
	GString *out;
	gboolean active; /* which list */
	gint64 since;
	guint n, more;
};

static void list_source(const struct wakeup_source *ws, gpointer data)
{
	struct name_list *l = data;
	const char *name = wakeup_source_name(ws);

	if (l->active ? !wakeup_source_active(ws) :
			wakeup_source_last_change(ws) < l->since)
		return;
	if (l->n == MAX_NAMES) {
		l->more++;
		return;
	}
	if (l->n++)
		g_string_append_c(l->out, ',');
	append_name(l->out, name, strlen(name), NULL);
}

static void append_names(GString *out, const char *field,
			 const struct wakeup_engine *engine, gboolean active,
			 gint64 since)
{
	struct name_list l = { out, active, since, 0, 0 };

	g_string_append_printf(out, ",\"%s\":[", field);
	if (engine)
		wakeup_foreach_source(engine, list_source, &l);
	if (l.more)
		g_string_append_printf(out, "%s\"+%u more\"", l.n ? "," : "",
				       l.more);
	g_string_append_c(out, ']');
}

/* One suspend attempt, from its start to its end, with result (0 or
 * -errno) at step ("" on success).  A failed attempt names the sources
 * active now and those signalled since the handshake was armed (or the
 * attempt began).  pid < 0: not a writer's. */
static void record_suspend(struct journal *j, const struct pf_event *ev,
			   const struct attempt_start *a)
{
	const struct wakeup_engine *engine = ev->error ? j->pw->engine : NULL;
	pid_t pid = ev->caller ? ev->caller->pid : -1;
	gint64 since, end, end_wall;
	GString *out;

	since = j->handshake_t && j->handshake_t <= a->t ? j->handshake_t :
							   a->t;
	j->handshake_t = 0;
	end = pf_clock_now(j->clock);
	end_wall = g_get_real_time();
	out = record_begin_at(j, "suspend", end, end_wall);
	if (!out)
		return;
	g_string_append_printf(
		out,
		",\"state\":\"%s\",\"by\":\"%s\",\"start\":%" G_GINT64_FORMAT
		",\"end\":%" G_GINT64_FORMAT ",\"start_wall\":%" G_GINT64_FORMAT
		",\"end_wall\":%" G_GINT64_FORMAT
		",\"result\":%d,\"step\":\"%s\"",
		ev->state == PM_ON ? "" : pm_state_label(ev->state), ev->by,
		a->t, end, a->wall, end_wall, ev->error,
		ev->step ? ev->step : "");
	append_names(out, "active", engine, TRUE, 0);
	append_names(out, "signalled", engine, FALSE, since);
	if (pid >= 0)
		append_caller(j, out, pid, ev->caller->uid);
	record_end(j);
}

/* The host slept, put to sleep by someone else (logind). */
static void record_sleep(struct journal *j, gint64 start, gint64 start_wall)
{
	gint64 end, end_wall;
	GString *out;

	end = pf_clock_now(j->clock);
	end_wall = g_get_real_time();
	out = record_begin_at(j, "sleep", end, end_wall);
	if (!out)
		return;
	g_string_append_printf(out,
			       ",\"start\":%" G_GINT64_FORMAT
			       ",\"end\":%" G_GINT64_FORMAT
			       ",\"start_wall\":%" G_GINT64_FORMAT
			       ",\"end_wall\":%" G_GINT64_FORMAT,
			       start, end, start_wall, end_wall);
	record_end(j);
}

static void record_backoff(struct journal *j, int result, guint pause_ms)
{
	GString *out = record_begin(j, "backoff");

	if (!out)
		return;
	g_string_append_printf(out, ",\"result\":%d,\"pause_ms\":%u", result,
			       pause_ms);
	record_end(j);
}

/* --- the engine's events ------------------------------------------------- */

static void attempt_event(struct journal *j, const struct pf_event *ev)
{
	gboolean host = !g_strcmp0(ev->by, "host");
	struct attempt_start *a = host ? &j->host : &j->own;

	if (ev->type == PF_EVENT_ATTEMPT_BEGIN) {
		a->t = pf_clock_now(j->clock);
		a->wall = g_get_real_time();
	} else if (host && !ev->error) {
		record_sleep(j, a->t, a->wall);
	} else {
		record_suspend(j, ev, a);
	}
}

static void on_event(struct pf_event *ev, gpointer data)
{
	struct journal *j = data;
	pid_t pid = ev->caller ? ev->caller->pid : -1;
	uid_t uid = ev->caller ? ev->caller->uid : 0;

	switch (ev->type) {
	case PF_EVENT_LOCK:
		record_lock(j, ev->name, ev->len, ev->timeout_ms, ev->created,
			    ev->was_active, pid, uid);
		break;
	case PF_EVENT_UNLOCK:
		record_unlock(j, ev->name, ev->len, ev->was_active, pid, uid);
		break;
	case PF_EVENT_EXPIRE:
	case PF_EVENT_GC:
		record_source(j, ev->type == PF_EVENT_GC ? "gc" : "expire",
			      wakeup_source_name(ev->source));
		break;
	case PF_EVENT_COUNT_READ:
		record_count_read(j, ev->count, pid, uid);
		break;
	case PF_EVENT_COUNT_WRITE:
		record_count_write(j, ev->parsed, ev->count, ev->error, pid,
				   uid);
		break;
	case PF_EVENT_AUTOSLEEP:
		record_autosleep(j,
				 ev->state == PM_ON ? "off" :
						      pm_state_label(ev->state),
				 pid, uid);
		break;
	case PF_EVENT_ATTEMPT_BEGIN:
	case PF_EVENT_ATTEMPT_END:
		attempt_event(j, ev);
		break;
	case PF_EVENT_BACKOFF:
		record_backoff(j, ev->error, ev->pause_ms);
		break;
	default:
		break;
	}
}

#define EVENTS                                                         \
	(PF_EVENT_BIT(PF_EVENT_LOCK) | PF_EVENT_BIT(PF_EVENT_UNLOCK) | \
	 PF_EVENT_BIT(PF_EVENT_EXPIRE) | PF_EVENT_BIT(PF_EVENT_GC) |   \
	 PF_EVENT_BIT(PF_EVENT_COUNT_READ) |                           \
	 PF_EVENT_BIT(PF_EVENT_COUNT_WRITE) |                          \
	 PF_EVENT_BIT(PF_EVENT_AUTOSLEEP) |                            \
	 PF_EVENT_BIT(PF_EVENT_ATTEMPT_BEGIN) |                        \
	 PF_EVENT_BIT(PF_EVENT_ATTEMPT_END) | PF_EVENT_BIT(PF_EVENT_BACKOFF))

static void restored_lock(const struct wakeup_source *ws, gpointer data)
{
	const char *name = wakeup_source_name(ws);

	if (wakeup_source_active(ws))
		record_lock(data, name, strlen(name),
			    wakeup_source_timeout_left(ws), FALSE, TRUE, 0, 0);
}

void journal_restored(struct journal *j)
{
	enum pm_state state;

	if (!j)
		return;
	state = autosleep_state(j->pw->autosleep);
	wakelocks_foreach(j->pw->wakelocks, restored_lock, j);
	if (state != PM_ON)
		record_autosleep(j, pm_state_label(state), -1, 0);
}

/* --- opening and closing ------------------------------------------------ */

struct journal *journal_open(const char *path, guint64 max_bytes,
			     struct power *pw, GError **error)
{
	struct journal *j;
	struct stat st;
	char last;
	int fd;

	fd = open_journal_file(path, 0);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int err = fd < 0 ? errno : EINVAL;

		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(err),
			    "--journal: %s: %s", path,
			    fd < 0 ? g_strerror(err) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	j = g_new0(struct journal, 1);
	j->pw = pw;
	j->clock = pw->clock;
	j->path = g_strdup(path);
	j->old_path = g_strconcat(path, ".1", NULL);
	j->max_bytes = MAX(max_bytes, JOURNAL_MIN_SIZE);
	j->fd = fd;
	j->size = st.st_size;
	g_mutex_init(&j->lock);
	g_cond_init(&j->wake);
	j->pending = g_string_sized_new(64 * 1024);
	j->callers = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
					   caller_info_free);
	/* The torn last line of a crash ends here, not in our first event. */
	if (st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) == 1 &&
	    last != '\n')
		g_string_append_c(j->pending, '\n');
	j->writer = g_thread_new("journal", writer_main, j);
	pf_events_subscribe(pw->events, EVENTS, on_event, j);
	return j;
}

void journal_close(struct journal *j)
{
	if (!j)
		return;
	pf_events_unsubscribe(j->pw->events, on_event, j);
	g_mutex_lock(&j->lock);
	append_reads(j);
	j->closing = TRUE;
	g_cond_signal(&j->wake);
	g_mutex_unlock(&j->lock);
	g_thread_join(j->writer);
	close(j->fd);
	g_hash_table_unref(j->callers);
	g_string_free(j->pending, TRUE);
	g_cond_clear(&j->wake);
	g_mutex_clear(&j->lock);
	g_free(j->old_path);
	g_free(j->path);
	g_free(j);
}
