/* state-file.h - keeping wake locks and settings across a restart. */
#ifndef POWERFS_STATE_FILE_H
#define POWERFS_STATE_FILE_H

#include <glib.h>
#include "powerfs/fs.h"
#include "powerfs/power.h"

struct state_file;

/* Restores what path holds (a missing file is a clean start; a corrupt one
 * is reported and ignored), then saves whenever something changes, at most
 * every 100 ms, and at pf_state_file_close(). */
struct state_file *state_file_open(const char *path, struct power *pw,
				   struct pf_fs *fs);
void state_file_close(struct state_file *sf);

#endif
