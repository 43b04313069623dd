package migration

import (
	"context"
	"slices"
	"strings"

	"github.com/sluicedb/sluice/internal/schema"
)

// A changed primary key. Rows are found by the original's key (its primary
// key, or the unique index that stands for it): ranges of it are copied, and
// a changed row is deleted from the new table by it and copied again. When
// the ALTER changes the primary key, the new table must still find rows by
// those columns quickly: an index of it must begin with them. The new
// primary key then either holds every column of the old one, and no two
// rows of the original can collide in it, or it is a unique constraint
// during the copy like any kept unique index: a collision stops the run,
// and changes wait for the end of the copy (shadowHasUnique).

// shadowRowKey checks that rows of the original can be found in the shadow
// by the original's key and, when the ALTER changed the primary key, points
// the shadow's key at the index that does it.
func (r *Runner) shadowRowKey(ctx context.Context) error {
	if sameKey(r.orig.PrimaryKey, r.shadow.PrimaryKey) && r.orig.HasPrimaryKey() == r.shadow.HasPrimaryKey() {
		return nil
	}
	if !r.alter.ChangesPrimaryKey || !r.orig.HasPrimaryKey() {
		return preflightErr("the ALTER changes the %s (%s -> %s); sluice does not support that yet", rowKeyName(r.orig),
			strings.Join(r.orig.PrimaryKey, ","), strings.Join(r.shadow.PrimaryKey, ","))
	}
	name, err := schema.KeyLedBy(ctx, r.db, r.shadow, r.orig.PrimaryKey)
	if err != nil {
		return err
	}
	newKey := "none"
	if r.shadow.HasPrimaryKey() {
		newKey = strings.Join(r.shadow.PrimaryKey, ",")
	}
	if name == "" {
		return preflightErr("the ALTER changes the primary key (%s -> %s) and leaves the new table no index that begins with %s, by which sluice finds the original's rows in it: add one in the same ALTER (ADD KEY (%s)), or run the ALTER natively",
			strings.Join(r.orig.PrimaryKey, ","), newKey, strings.Join(r.orig.PrimaryKey, ","), strings.Join(r.orig.PrimaryKey, ", "))
	}
	// The shadow's own primary key collides where it lacks a column of the
	// original's.
	r.newPKCollides = r.shadow.HasPrimaryKey() && !schema.HoldsAll(r.shadow.PrimaryKey, r.orig.PrimaryKey)
	r.log.Info("the ALTER changes the primary key: rows are found in the new table by one of its indexes",
		"old", strings.Join(r.orig.PrimaryKey, ","), "new", newKey, "index", name, "new key is a unique constraint during the copy", r.newPKCollides)
	r.shadow.KeyIndex, r.shadow.PrimaryKey = name, slices.Clone(r.orig.PrimaryKey)
	return nil
}
