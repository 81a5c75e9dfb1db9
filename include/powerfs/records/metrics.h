/* metrics.h - the statistics for Prometheus: DIR/powerfs.prom in the text
 * exposition format, for node_exporter's textfile collector (--metrics-dir).
 */
#ifndef POWERFS_METRICS_H
#define POWERFS_METRICS_H

#include <glib.h>
#include "powerfs/engine/power.h"

struct pf_metrics;

/* The file's name in the directory. */
#define PF_METRICS_FILE "powerfs.prom"

/* Writes dir/powerfs.prom now, then again after changes (see metrics.c).
 * A directory that cannot take the file is reported and the metrics stay
 * off: the mount is served all the same. */
struct pf_metrics *pf_metrics_open(const char *dir, struct power *pw);
/* Stops writing, after the write in progress.  With remove (a clean end:
 * nothing serves these numbers any more) the file goes too; without (a
 * restart), it stays for the successor, which writes it at its start.
 * NULL is ignored. */
void pf_metrics_close(struct pf_metrics *m, gboolean remove);

/* The whole exposition as it is now (exported for the tests). */
void pf_metrics_render(struct power *pw, GString *out);

#endif
