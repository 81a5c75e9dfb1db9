/* state-file.h - keeping wake locks and settings across a restart. */
#ifndef POWERFS_STATE_FILE_H
#define POWERFS_STATE_FILE_H

#include <glib.h>
#include "powerfs/engine/power.h"
#include "powerfs/sysfs/owners.h"

struct state_file;

/* Restores what path holds if it was written during this boot (a missing
 * file, one of another boot: a clean start; a line with a value out of
 * range is dropped) into pw and owners (may be NULL: none kept), then logs
 * every change: see state-file.c. */
struct state_file *state_file_open(const char *path, struct power *pw,
				   struct pf_owners *owners);
/* Writes what changed, before a request that changed it is answered. */
void state_file_flush(struct state_file *sf);
void state_file_close(struct state_file *sf);

#endif
