/* owners.c - the files' modes and owners (see owners.h). */
#include <sys/stat.h>

#include "powerfs/sysfs/owners.h"

struct entry {
	struct pf_owner owner;
	char *path;
	gboolean served;
};

struct pf_owners {
	GPtrArray *entries;  /* struct entry, in the order added */
	GHashTable *by_path; /* path -> struct entry */
};

static void entry_free(gpointer data)
{
	struct entry *e = data;

	g_free(e->path);
	g_free(e);
}

struct pf_owners *pf_owners_new(void)
{
	struct pf_owners *owners = g_new0(struct pf_owners, 1);

	owners->entries = g_ptr_array_new_with_free_func(entry_free);
	owners->by_path = g_hash_table_new(g_str_hash, g_str_equal);
	return owners;
}

void pf_owners_free(struct pf_owners *owners)
{
	if (!owners)
		return;
	g_hash_table_unref(owners->by_path);
	g_ptr_array_unref(owners->entries);
	g_free(owners);
}

struct pf_owner *pf_owners_add(struct pf_owners *owners, const char *path,
			       mode_t mode, gboolean served)
{
	struct entry *e = g_new0(struct entry, 1);

	e->owner.mode = mode;
	e->path = g_strdup(path);
	e->served = served;
	g_ptr_array_add(owners->entries, e);
	g_hash_table_insert(owners->by_path, e->path, e);
	return &e->owner;
}

gboolean pf_owners_set(struct pf_owners *owners, const char *path, mode_t mode,
		       uid_t uid, gid_t gid)
{
	struct entry *e = g_hash_table_lookup(owners->by_path, path);

	if (!e)
		return FALSE;
	e->owner.mode = (e->owner.mode & S_IFMT) | (mode & 07777);
	e->owner.uid = uid;
	e->owner.gid = gid;
	return TRUE;
}

void pf_owners_foreach(const struct pf_owners *owners, pf_owners_visit visit,
		       gpointer data)
{
	for (guint i = 0; i < owners->entries->len; i++) {
		const struct entry *e = owners->entries->pdata[i];

		if (e->served)
			visit(e->path, e->owner.mode & 07777, e->owner.uid,
			      e->owner.gid, data);
	}
}

void pf_owners_chown_writable(struct pf_owners *owners, uid_t uid, gid_t gid)
{
	for (guint i = 0; i < owners->entries->len; i++) {
		struct entry *e = owners->entries->pdata[i];

		if (S_ISREG(e->owner.mode) && (e->owner.mode & 0222)) {
			e->owner.uid = uid;
			e->owner.gid = gid;
		}
	}
	g_message("writable files owned by %u:%u", uid, gid);
}
