/* log.c - where powerfs's g_log messages go.
 *
 * In the foreground, GLib's default writer, all on stderr (GLib would send
 * info and debug to stdout).  As a daemon, syslog, since stderr is gone.
 */
#include <syslog.h>

#include "powerfs/log.h"

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

void pf_log_setup(gboolean debug, gboolean to_syslog)
{
	if (debug)
		g_log_set_debug_enabled(TRUE);
	g_log_writer_default_set_use_stderr(TRUE);
	if (to_syslog) {
		openlog("powerfs", LOG_PID, LOG_DAEMON);
		g_log_set_writer_func(write_syslog, NULL, NULL);
	}
}
