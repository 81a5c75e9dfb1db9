/* log.h - where powerfs's g_log messages go. */
#ifndef POWERFS_LOG_H
#define POWERFS_LOG_H

#include <glib.h>

/* Foreground: everything on stderr.  Background: syslog (daemon facility).
 * debug enables g_debug() output. */
void pf_log_setup(gboolean debug, gboolean to_syslog);
/* At exit: says what the rate limit kept from the log. */
void pf_log_flush(void);

#endif
