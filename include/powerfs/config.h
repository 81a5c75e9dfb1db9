/* config.h - powerfs's command line, in one struct config (config.c):
 * parsed, and checked before anything is mounted. */
#ifndef POWERFS_CONFIG_H
#define POWERFS_CONFIG_H

#include <sys/types.h>
#include <glib.h>

struct config {
	gboolean foreground;
	gboolean debug;
	gboolean version;
	gchar **mount_options;
	gchar *backend;
	gint simulate_sleep_ms;
	gchar *simulate_states;
	gint wakelock_limit;
	gint wakelock_gc_seconds;
	gboolean no_capability_check;
	gchar **trust_userns_owner;
	gint suspend_timeout;
	gboolean inhibit_sleep;
	gchar *host_power;
	gchar *host_suspend_stats;
	gchar *class_wakeup;
	gchar *wakeup_reasons;
	gchar *state_file;
	gchar *journal;
	gint64 journal_size;
	gchar *metrics_dir;
	gchar *owner;
	gboolean no_keeper;
	gchar **args;
	/* Parsed from the above. */
	uid_t owner_uid;
	gid_t owner_gid;
	GArray *trusted_userns_owners; /* uid_t, or NULL */
};

/* The one configuration, filled in by config_parse(). */
extern struct config config;

/* Parses the command line (exits on an error, with usage_error()). */
void config_parse(int *argc, char ***argv);
void config_free(void);
/* The states --simulate-states lists (PM_STATE_BIT()s). */
guint config_simulate_states(void);
/* A fresh start's checks of the mount points and the paths given, before
 * anything is mounted: the real paths of the mount points (extra ones
 * NULL if not asked for).  argv, the command line the keeper starts its
 * servers with, gets the absolute paths a server needs. */
void config_check(char **argv, char **mountpoint, char **class_wakeup_dir,
		  char **wakeup_reasons_dir);
/* Restarted with the mounts live: only the files' paths are checked. */
void config_check_files(const char *mountpoint);

#endif
