/* backend-sysfs.c - suspend by writing to a backing sysfs directory.
 *
 * DIR is normally the host's /sys/power when powerfs serves a container; it
 * can also be another powerfs.  The states are DIR/state's at start; a
 * suspend writes the state's name to DIR/state, and that write's errno is the
 * result.  The write blocks until the system has resumed, so it runs in a
 * thread of its own and reports back to the main loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <gio/gio.h>

#include "powerfs/backend.h"
#include "powerfs/suspend.h"

struct sysfs_backend {
	struct backend base;
	char *state_path;
	guint states;
};

struct sysfs_write {
	char *path;
	const char *label;
	int error;
	backend_done_func done;
	gpointer data;
};

static guint sysfs_states(struct backend *be)
{
	return ((struct sysfs_backend *)be)->states;
}

static gboolean write_finished(gpointer data)
{
	struct sysfs_write *w = data;

	w->done(w->error, w->data);
	g_free(w->path);
	g_free(w);
	return G_SOURCE_REMOVE;
}

static gpointer write_state(gpointer data)
{
	struct sysfs_write *w = data;
	int fd = open(w->path, O_WRONLY | O_CLOEXEC);
	gssize len = strlen(w->label);

	if (fd < 0 || write(fd, w->label, len) != len)
		w->error = -errno;
	if (fd >= 0)
		close(fd);
	g_idle_add(write_finished, w);
	return NULL;
}

static int sysfs_suspend(struct backend *be, enum pm_state state,
			 backend_done_func done, gpointer data)
{
	struct sysfs_backend *sb = (struct sysfs_backend *)be;
	struct sysfs_write *w = g_new0(struct sysfs_write, 1);

	w->path = g_strdup(sb->state_path);
	w->label = pm_state_label(state);
	w->done = done;
	w->data = data;
	g_thread_unref(g_thread_new("powerfs-suspend", write_state, w));
	return PF_PENDING;
}

static void sysfs_free(struct backend *be)
{
	struct sysfs_backend *sb = (struct sysfs_backend *)be;

	g_free(sb->state_path);
	g_free(sb);
}

static const struct backend_ops sysfs_ops = {
	.name = "sysfs",
	.states = sysfs_states,
	.suspend = sysfs_suspend,
	.free = sysfs_free,
};

struct backend *backend_sysfs_new(const char *dir, GError **error)
{
	struct sysfs_backend *sb;
	g_autofree char *path = g_build_filename(dir, "state", NULL);
	g_autofree char *text = NULL;
	g_auto(GStrv) words = NULL;
	guint states = 0;

	if (!g_file_get_contents(path, &text, NULL, error))
		return NULL;
	words = g_strsplit_set(g_strstrip(text), " \n", -1);
	for (guint i = 0; words[i]; i++)
		for (enum pm_state s = PM_FREEZE; s < PM_NR_STATES; s++)
			if (!strcmp(words[i], pm_state_label(s)))
				states |= PM_STATE_BIT(s);
	sb = g_new0(struct sysfs_backend, 1);
	sb->base.ops = &sysfs_ops;
	sb->state_path = g_steal_pointer(&path);
	sb->states = states;
	return &sb->base;
}
