/* host-power.h - reading the host kernel's /sys/power, for the backends
 * that put the host to sleep (logind, sysfs): its settings, which powerfs
 * shows as they are, and the IRQ that woke it.
 *
 * Each read opens the file by its path: no descriptor is held, since the
 * directory may be another powerfs's mount, which must stay free to go.
 */
#ifndef POWERFS_HOST_POWER_H
#define POWERFS_HOST_POWER_H

#include <glib.h>

/* The file's content (one read of at most a page), or a negative errno:
 * what read(2) of that file says, ENODATA included. */
int host_power_read(const char *dir, const char *name, GString *out);
gboolean host_power_has(const char *dir, const char *name);

/* The IRQ the host says woke it from its last sleep (pm_wakeup_irq), and
 * its first handler's name from the host's sysfs (kernel/irq/N/actions
 * beside power/; *name NULL if none is told).  FALSE if it says none. */
gboolean host_power_wakeup_irq(const char *dir, int *irq, char **name);

#endif
