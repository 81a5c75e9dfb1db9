/* fuzz-store.c - libFuzzer harness over every store and show handler.
 *
 * An input is a sequence of commands separated by 0xff bytes; each command
 * is one selector byte (which file) and the bytes written to it.  Every
 * input runs against a fresh power core on a fake clock, which is advanced
 * between commands so timeouts, simulated sleeps and autosleep cycles run
 * too.  All files are shown after every command.
 */
#include <string.h>

#include "powerfs/sysfs/attrs.h"

static void store_done(gssize result, gpointer data)
{
	(void)result;
	(*(int *)data)--;
}

static void show_all(struct power *pw, const struct pf_attr *attrs, guint n)
{
	GString *out = g_string_new(NULL);

	for (guint i = 0; i < n; i++) {
		if (!attrs[i].show)
			continue;
		g_string_truncate(out, 0);
		attrs[i].show(pw, out);
	}
	g_string_free(out, TRUE);
}

static GLogWriterOutput quiet(GLogLevelFlags level, const GLogField *fields,
			      gsize n_fields, gpointer data)
{
	(void)level, (void)fields, (void)n_fields, (void)data;
	return G_LOG_WRITER_HANDLED;
}

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
	struct pf_clock *clock = pf_clock_new_fake(1000000000);
	struct power_options opts = { 8, 1, FALSE, NULL };
	struct power *pw;
	const struct pf_attr *attrs;
	struct pf_caller caller = { 0, 0, 0 };
	guint n_attrs, n_stores = 0, stores[32];
	int pending = 0;
	size_t pos = 0;

	static gboolean quieted;

	/* Structured messages (G_LOG_USE_STRUCTURED); one writer a process. */
	if (!quieted)
		g_log_set_writer_func(quiet, NULL, NULL);
	quieted = TRUE;
	attrs = pf_attrs(&n_attrs);
	for (guint i = 0; i < n_attrs; i++)
		if (attrs[i].store)
			stores[n_stores++] = i;
	pw = power_new(clock,
		       backend_simulate_new(clock, 50,
					    PM_STATE_BIT(PM_FREEZE) |
						    PM_STATE_BIT(PM_MEM)),
		       &opts);
	while (pos < size) {
		const guint8 *end = memchr(data + pos, 0xff, size - pos);
		size_t len = (end ? (size_t)(end - data) : size) - pos;
		char buf[PF_STORE_MAX + 1];

		if (len >= 1) {
			const struct pf_attr *a =
				&attrs[stores[data[pos] % n_stores]];
			size_t n = MIN(len - 1, (size_t)PF_STORE_MAX);
			gssize ret;

			memcpy(buf, data + pos + 1, n);
			buf[n] = '\0';
			if (n) {
				pending++;
				ret = a->store(pw, &caller, buf, n, store_done,
					       &pending);
				if (ret != PF_PENDING)
					pending--;
				g_assert(ret == PF_PENDING ||
					 (ret < 0 && ret > -4096) ||
					 ret == (gssize)n);
			}
		}
		pf_clock_fake_advance(clock, 7000);
		show_all(pw, attrs, n_attrs);
		pos += len + 1;
	}
	/* Let everything pending finish, then switch autosleep off. */
	pf_clock_fake_advance(clock, 2000000);
	for (guint i = 0; i < n_attrs; i++) {
		char off[] = "off";

		if (strcmp(attrs[i].name, "autosleep"))
			continue;
		pending++;
		if (attrs[i].store(pw, &caller, off, 3, store_done, &pending) !=
		    PF_PENDING)
			pending--;
	}
	pf_clock_fake_advance(clock, 2000000);
	g_assert(pending == 0);
	power_free(pw);
	return 0;
}
