/* log.c - where powerfs's g_log messages go.
 *
 * In the foreground, GLib's default writer, all on stderr (GLib would send
 * info and debug to stdout).  As a daemon, syslog, since stderr is gone.
 *
 * Whatever a client does, the log stays readable: each call site may log
 * a burst of BURST lines, then one line per REFILL_US; what it had to drop
 * is counted and said with its next line.  Nothing runs on a timer, so an
 * idle daemon stays idle.
 */
#include <syslog.h>

#include "powerfs/records/log.h"

static int syslog_priority(GLogLevelFlags level)
{
	if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL))
		return LOG_ERR;
	if (level & G_LOG_LEVEL_WARNING)
		return LOG_WARNING;
	if (level & G_LOG_LEVEL_MESSAGE)
		return LOG_NOTICE;
	if (level & G_LOG_LEVEL_INFO)
		return LOG_INFO;
	return LOG_DEBUG;
}

static GLogWriterOutput write_syslog(GLogLevelFlags level,
				     const GLogField *fields, gsize n_fields,
				     gpointer data)
{
	(void)data;
	if (g_log_writer_default_would_drop(level, G_LOG_DOMAIN))
		return G_LOG_WRITER_HANDLED;
	for (gsize i = 0; i < n_fields; i++)
		if (!g_strcmp0(fields[i].key, "MESSAGE")) {
			syslog(syslog_priority(level), "%s",
			       (const char *)fields[i].value);
			break;
		}
	return G_LOG_WRITER_HANDLED;
}

#define BURST 10
#define REFILL_US (10 * G_USEC_PER_SEC)

/* A call site's token bucket. */
struct site {
	double tokens;
	gint64 last; /* when tokens was computed */
	guint dropped;
	GLogLevelFlags level; /* of the last line dropped */
	char *message;	      /* the last line dropped */
};

static void site_free(gpointer data)
{
	struct site *s = data;

	g_free(s->message);
	g_free(s);
}

static GMutex sites_lock;
static GHashTable *sites; /* "file:line" -> struct site */
static GLogWriterFunc next_writer;
static gboolean writer_set;

static const char *field(const GLogField *fields, gsize n, const char *key)
{
	for (gsize i = 0; i < n; i++)
		if (!g_strcmp0(fields[i].key, key))
			return fields[i].value;
	return NULL;
}

/* TRUE if the site may log now; *dropped is then what it could not. */
static gboolean site_allows(const char *file, const char *line,
			    GLogLevelFlags level, const char *msg,
			    guint *dropped)
{
	g_autofree char *key = g_strconcat(file, ":", line, NULL);
	gint64 now = g_get_monotonic_time();
	struct site *s;
	gboolean ok;

	g_mutex_lock(&sites_lock);
	s = g_hash_table_lookup(sites, key);
	if (!s) {
		s = g_new0(struct site, 1);
		s->tokens = BURST;
		s->last = now;
		g_hash_table_insert(sites, g_steal_pointer(&key), s);
	}
	s->tokens = MIN(BURST, s->tokens + (double)(now - s->last) / REFILL_US);
	s->last = now;
	ok = s->tokens >= 1;
	if (ok) {
		s->tokens -= 1;
		*dropped = s->dropped;
		s->dropped = 0;
		g_clear_pointer(&s->message, g_free);
	} else {
		s->dropped++;
		s->level = level;
		g_free(s->message);
		s->message = g_strdup(msg);
	}
	g_mutex_unlock(&sites_lock);
	return ok;
}

static GLogWriterOutput write_limited(GLogLevelFlags level,
				      const GLogField *fields, gsize n_fields,
				      gpointer data)
{
	const char *file = field(fields, n_fields, "CODE_FILE");
	const char *line = field(fields, n_fields, "CODE_LINE");
	const char *msg = field(fields, n_fields, "MESSAGE");
	g_autofree GLogField *copy = NULL;
	g_autofree char *said = NULL;
	guint dropped = 0;

	/* Debug output is asked for; errors and criticals always go out. */
	if (!file || !line || !msg ||
	    (level &
	     (G_LOG_LEVEL_DEBUG | G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL)) ||
	    g_log_writer_default_would_drop(level, G_LOG_DOMAIN))
		return next_writer(level, fields, n_fields, data);
	if (!site_allows(file, line, level, msg, &dropped))
		return G_LOG_WRITER_HANDLED;
	if (!dropped)
		return next_writer(level, fields, n_fields, data);
	copy = g_memdup2(fields, n_fields * sizeof(*fields));
	said = g_strdup_printf("%s (and %u more like it, not logged)", msg,
			       dropped);
	for (gsize i = 0; i < n_fields; i++)
		if (!g_strcmp0(copy[i].key, "MESSAGE")) {
			copy[i].value = said;
			copy[i].length = -1;
		}
	return next_writer(level, copy, n_fields, data);
}

void pf_log_setup(gboolean debug, gboolean to_syslog)
{
	if (debug)
		g_log_set_debug_enabled(TRUE);
	g_log_writer_default_set_use_stderr(TRUE);
	if (!sites)
		sites = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
					      site_free);
	next_writer = g_log_writer_default;
	if (to_syslog) {
		openlog("powerfs", LOG_PID, LOG_DAEMON);
		next_writer = write_syslog;
	}
	/* GLib takes a writer once per process; later calls only change
	 * where the lines go (the daemon switches to syslog). */
	if (!writer_set) {
		g_log_set_writer_func(write_limited, NULL, NULL);
		writer_set = TRUE;
	}
}

void pf_log_flush(void)
{
	GHashTableIter it;
	gpointer value;

	if (!sites)
		return;
	g_mutex_lock(&sites_lock);
	g_hash_table_iter_init(&it, sites);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		struct site *s = value;
		g_autofree char *said = NULL;

		if (!s->dropped)
			continue;
		said = g_strdup_printf("%s (and %u more like it, not logged)",
				       s->message, s->dropped - 1);
		{
			GLogField fields[] = {
				{ "GLIB_DOMAIN", G_LOG_DOMAIN, -1 },
				{ "MESSAGE", said, -1 },
			};

			next_writer(s->level, fields, G_N_ELEMENTS(fields),
				    NULL);
		}
		s->dropped = 0;
	}
	g_mutex_unlock(&sites_lock);
}
