/* host-power.c - reading the host kernel's /sys/power (see host-power.h).
 *
 * sysfs files are small and answer at once: reading them from the main
 * loop is fine.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "powerfs/backends/host-power.h"

/* A sysfs attribute's content is at most a page. */
#define ATTR_MAX 4096

int host_power_read(const char *dir, const char *name, GString *out)
{
	g_autofree char *path = NULL;
	char buf[ATTR_MAX];
	int fd, err;
	gssize n;

	if (!dir)
		return -ENOENT;
	path = g_build_filename(dir, name, NULL);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf));
	err = errno;
	close(fd);
	if (n < 0)
		return -err;
	g_string_append_len(out, buf, n);
	return 0;
}

gboolean host_power_has(const char *dir, const char *name)
{
	g_autofree char *path = dir ? g_build_filename(dir, name, NULL) : NULL;

	return path && access(path, F_OK) == 0;
}

gboolean host_power_wakeup_irq(const char *dir, int *irq, char **name)
{
	g_autoptr(GString) text = g_string_new(NULL);
	g_autoptr(GString) actions = g_string_new(NULL);
	g_autofree char *path = NULL;
	guint64 n;

	*name = NULL;
	if (host_power_read(dir, "pm_wakeup_irq", text) < 0 ||
	    !g_ascii_string_to_unsigned(g_strchomp(text->str), 10, 1, G_MAXINT,
					&n, NULL))
		return FALSE;
	*irq = (int)n;
	/* "name1, name2\n": the handlers sharing the line, first first. */
	path = g_strdup_printf("../kernel/irq/%d/actions", *irq);
	if (host_power_read(dir, path, actions) == 0) {
		char *end = strpbrk(actions->str, ",\n");

		if (end)
			*end = '\0';
		if (actions->str[0])
			*name = g_strdup(actions->str);
	}
	return TRUE;
}
