package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/plan"
	"github.com/sluicedb/sluice/internal/schema"
)

func newPlan() *cobra.Command {
	var f migrateFlags
	c := &cobra.Command{
		Use:   "plan",
		Short: "Say how sluice would carry out an ALTER, what it would block, and its risks; change nothing",
		Long: `plan classifies every clause of the ALTER for the connected server (INSTANT,
in place without a rebuild, in-place rebuild, or copy), picks sluice's path
(instant, in-place with tuned parallel index-build settings, or shadow copy),
and prints why, what it blocks and for how long at most, a rough time, disk and
memory estimate, the session settings it would use, and the risks, with a count
of the rows concerned. It only reads.`,
		Example: `  sluice plan --host db1 --user dba --database shop --table orders --alter "ADD INDEX (created_at)"
  sluice plan ... --alter "MODIFY note VARCHAR(20)" --format json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.pairs(true); err != nil {
				return err
			}
			return runPlan(c.Context(), c, f)
		},
	}
	connectionFlags(c, &f)
	carryTriggersFlag(c, &f)
	captureFlag(c, &f)
	c.Flags().StringVar(&f.format, "format", "text", "text or json")
	return c
}

func runPlan(ctx context.Context, c *cobra.Command, f migrateFlags) error {
	if c.Flags().Changed("password") {
		return errPasswordFlag
	}
	if f.capture != "binlog" && f.capture != "triggers" {
		return fmt.Errorf("--capture %q: use binlog or triggers", f.capture)
	}
	if f.format != "text" && f.format != "json" {
		return fmt.Errorf("--format %q: use text or json", f.format)
	}
	conn, database, err := tableConnection(c, f)
	if err != nil {
		return err
	}
	if err := conn.Validate(); err != nil {
		return err
	}
	db, err := dbconn.Open(ctx, conn, database, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	var plans []*plan.Plan
	for i, table := range f.tables {
		p, err := planOne(ctx, db, conn.Host, database, table, f.alters[i], f, len(f.tables) > 1)
		if err != nil {
			return err
		}
		plans = append(plans, p)
	}
	out := c.OutOrStdout()
	if f.format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if len(plans) == 1 {
			return enc.Encode(plans[0])
		}
		return enc.Encode(plans)
	}
	for i, p := range plans {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprint(out, p.Text())
	}
	if len(plans) > 1 {
		fmt.Fprintf(out, "\n%s\n", plan.GroupNote(f.tables))
	}
	return nil
}

// planOne plans the ALTER of one table; in a group, on the copy path.
func planOne(ctx context.Context, db *sql.DB, host, database, table, alter string, f migrateFlags, inGroup bool) (*plan.Plan, error) {
	a, err := ddl.Parse(alter)
	if err != nil && !errors.Is(err, ddl.ErrUnknownName) {
		return nil, err
	}
	if a == nil {
		// A character set or collation the server may know.
		if err := ddl.LearnNames(ctx, db); err != nil {
			return nil, err
		}
		if a, err = ddl.Parse(alter); err != nil {
			return nil, err
		}
	}
	var lctn int
	if err := db.QueryRowContext(ctx, "SELECT @@lower_case_table_names").Scan(&lctn); err != nil {
		return nil, err
	}
	if err := a.NamesOther(database, table, lctn != 0); err != nil {
		return nil, err
	}
	p, _, err := plan.Make(ctx, db, host, database, table, a, plan.Options{
		Replicas: f.replicas, MaxInplace: f.maxInplace, LockWait: f.lockWait, CutoverLock: f.cutoverLock, CopyThreads: f.copyWorkers,
		CarryTriggers: f.carryTriggers, CaptureTriggers: f.capture == "triggers", Group: inGroup,
	})
	if errors.Is(err, schema.ErrNotFound) {
		return nil, fmt.Errorf("table %s.%s does not exist; check --database and --table", database, table)
	}
	return p, err
}
