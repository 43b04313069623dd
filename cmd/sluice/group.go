package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/migration"
)

// pairs checks the --table and --alter flags as given: with alters (migrate,
// plan), one ALTER for each table; and sets table and alter to the first
// pair.
func (f *migrateFlags) pairs(alters bool) error {
	if len(f.tables) > 0 {
		f.table = f.tables[0]
	}
	if len(f.alters) > 0 {
		f.alter = f.alters[0]
	}
	switch {
	case !alters || len(f.tables) == 0:
		// No table: the command says so, naming --table.
	case len(f.alters) == 0:
		return fmt.Errorf("no ALTER given: pass --alter \"ADD COLUMN ...\"")
	case len(f.alters) != len(f.tables):
		return fmt.Errorf("%d --table and %d --alter given: give one --alter for each --table, in the same order", len(f.tables), len(f.alters))
	}
	for _, t := range f.tables {
		if t == "" {
			return fmt.Errorf("an empty --table given: name the table")
		}
	}
	return nil
}

// runGroup migrates several tables together (migration.RunGroup): each
// copied beside the others, all swapped in one RENAME TABLE.
func runGroup(ctx context.Context, c *cobra.Command, f migrateFlags, base migration.Config) error {
	cfgs := make([]migration.Config, len(f.tables))
	for i := range f.tables {
		cfgs[i] = base
		cfgs[i].Table, cfgs[i].Alter = f.tables[i], f.alters[i]
	}
	results, err := migration.RunGroup(ctx, cfgs)
	if err != nil {
		var kept []string
		for _, r := range results {
			if r.Swapped {
				return err // the swap was made; what failed after it says what to do
			}
			if r.Kept != "" {
				kept = append(kept, r.Kept)
			}
		}
		switch {
		case len(kept) > 0:
			return fmt.Errorf("%w\nsluice: no table was swapped; the new tables %s and their checkpoints are kept: run the same command again to resume, or add --restart to start over", err, strings.Join(kept, ", "))
		case errors.Is(err, migration.ErrConfig) || errors.Is(err, migration.ErrPreflight):
			return err // refused before anything was made
		case ctx.Err() != nil:
			return fmt.Errorf("interrupted; the original tables %s of %s are untouched and no lock is held", strings.Join(f.tables, ", "), base.Database)
		}
		return fmt.Errorf("%w\nsluice: no table was swapped; the originals are as they were", err)
	}
	out := c.OutOrStdout()
	var together, done []string
	for i, res := range results {
		printResult(out, base.Database, f.tables[i], res)
		if res.AlreadyDone {
			done = append(done, f.tables[i])
		} else {
			together = append(together, f.tables[i])
		}
	}
	switch {
	case len(done) == 0:
		fmt.Fprintf(out, "sluice: %s swapped together in one RENAME TABLE\n", strings.Join(together, ", "))
	case len(together) > 0:
		fmt.Fprintf(out, "sluice: %s swapped in one RENAME TABLE; %s had been swapped by an earlier run\n", strings.Join(together, ", "), strings.Join(done, ", "))
	}
	return nil
}
