/* fuzz-state-file.c - libFuzzer harness over the state-file loader.
 *
 * The input is the body of a state file: it is written after a header of
 * this boot (so every line is parsed, not refused as another boot's) to a
 * temporary file, and a fresh power core on a fake clock restores it
 * (state_file_open(): parse, apply, then the snapshot that replaces the
 * log).  Every input is accepted: a line with a value out of range is
 * dropped, never trusted.
 *
 * Checked: a second core restored from that snapshot writes the same
 * snapshot (what was restored is what was saved: a fixed point), and under
 * ASan nothing leaks or overflows.  The owners the file names go to an
 * owners object holding the attribute table's paths, as fs.c makes it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "powerfs/sysfs/attrs.h"
#include "powerfs/sysfs/owners.h"
#include "powerfs/records/state-file.h"

/* --- the owners, as fs.c lays them out ---------------------------------- */

/* The attribute table's files, by path, as fs.c adds them. */
static struct pf_owners *owners_new(void)
{
	struct pf_owners *owners = pf_owners_new();
	guint n;
	const struct pf_attr *attrs = pf_attrs(&n);

	for (guint i = 0; i < n; i++) {
		g_autofree char *path =
			attrs[i].parent < 0 ?
				g_strdup(attrs[i].name) :
				g_strconcat(attrs[attrs[i].parent].name, "/",
					    attrs[i].name, NULL);

		pf_owners_add(owners, path, attrs[i].mode, TRUE);
	}
	return owners;
}

/* --- the harness ----------------------------------------------------------- */

static GLogWriterOutput quiet(GLogLevelFlags level, const GLogField *fields,
			      gsize n_fields, gpointer data)
{
	(void)level, (void)fields, (void)n_fields, (void)data;
	return G_LOG_WRITER_HANDLED;
}

static char *path;

/* Restores path into a fresh core and returns the snapshot it writes. */
static char *restore_and_save(void)
{
	struct pf_clock *clock = pf_clock_new_fake(1000000000000);
	struct power_options opts = { 100, 300, FALSE, NULL };
	struct power *pw =
		power_new(clock,
			  backend_simulate_new(clock, 50,
					       PM_STATE_BIT(PM_FREEZE) |
						       PM_STATE_BIT(PM_MEM)),
			  &opts);
	struct pf_owners *owners = owners_new();
	struct state_file *sf;
	char *text = NULL;

	sf = state_file_open(path, pw, owners);
	state_file_close(sf);
	pf_owners_free(owners);
	power_free(pw);
	if (!g_file_get_contents(path, &text, NULL, NULL))
		abort();
	return text;
}

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
	g_autofree char *boot = NULL;
	g_autofree char *first = NULL, *second = NULL;
	GString *file;

	if (!path) {
		if (!getenv("FUZZ_VERBOSE"))
			g_log_set_writer_func(quiet, NULL, NULL);
		path = g_strdup_printf("%s/powerfs-fuzz-state.%d",
				       g_get_tmp_dir(), (int)getpid());
	}
	if (!g_file_get_contents("/proc/sys/kernel/random/boot_id", &boot, NULL,
				 NULL))
		abort();
	file = g_string_new(NULL);
	g_string_append_printf(file, "powerfs-state 2 %s\n", g_strstrip(boot));
	g_string_append_len(file, (const char *)data, (gssize)size);
	if (!g_file_set_contents(path, file->str, (gssize)file->len, NULL))
		abort();
	g_string_free(file, TRUE);

	first = restore_and_save();
	second = restore_and_save();
	if (strcmp(first, second)) {
		fprintf(stderr,
			"restoring a snapshot changed it:\n--- first\n"
			"%s--- second\n%s",
			first, second);
		abort();
	}
	unlink(path);
	return 0;
}
